// Owning, signalling and reaping one child process (see child_process.h).
#include "core/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sstream>
#include <utility>
#include <vector>

extern char** environ;

namespace dolsot {
namespace {

// waitpid with EINTR retried.
pid_t WaitPid(pid_t pid, int* status, int flags) {
  pid_t r;
  do {
    r = ::waitpid(pid, status, flags);
  } while (r < 0 && errno == EINTR);
  return r;
}

// Waits up to `timeout` for `pidfd` to become readable (the child exited).
void PollExit(int pidfd, std::chrono::nanoseconds timeout) {
  int ms = static_cast<int>(std::min<long long>(
      std::chrono::ceil<std::chrono::milliseconds>(timeout).count(), 1 << 30));
  pollfd p{pidfd, POLLIN, 0};
  (void)::poll(&p, 1, ms);  // EINTR or readiness: the caller looks again
}

Status ReapedElsewhere(pid_t pid) {
  return Status(ErrorCode::kUnavailable,
                "child process " + std::to_string(pid) +
                    " was reaped by someone else (is SIGCHLD ignored in this process?)");
}

}  // namespace

UniqueFd OpenPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#else
  return UniqueFd();
#endif
}

int SendSignal(int pidfd, pid_t pid, int signal) {
#ifdef SYS_pidfd_send_signal
  if (pidfd >= 0) return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0));
#endif
  return ::kill(pid, signal);
}

ChildProcess ChildProcess::Adopt(pid_t pid, Group group, Tracking tracking) {
  if (pid <= 0) return ChildProcess();
  UniqueFd pidfd = tracking == Tracking::kPidfdIfAvailable ? OpenPidfd(pid) : UniqueFd();
  return ChildProcess(pid, group, std::move(pidfd));
}

ChildProcess::~ChildProcess() { KillAndReap(); }

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      group_(other.group_),
      pidfd_(std::move(other.pidfd_)),
      wait_status_(std::exchange(other.wait_status_, std::nullopt)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    KillAndReap();
    pid_ = std::exchange(other.pid_, -1);
    group_ = other.group_;
    pidfd_ = std::move(other.pidfd_);
    wait_status_ = std::exchange(other.wait_status_, std::nullopt);
  }
  return *this;
}

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  // Not reaped yet, so the group id is still this child's own: it cannot
  // name another process's group.
  if (group_ == Group::kOwn) ::kill(-pid_, SIGKILL);
  (void)SendSignal(pidfd_.get(), pid_, SIGKILL);
}

Status ChildProcess::Signal(int signal) {
  if (pid_ <= 0) return Status(ErrorCode::kUnavailable, "the child process is already reaped");
  if (SendSignal(pidfd_.get(), pid_, signal) != 0) {
    return IoError("signalling child process " + std::to_string(pid_) + ": " +
                   ::strerror(errno));
  }
  return Status::Ok();
}

std::optional<int> ChildProcess::TryReap() {
  if (pid_ <= 0) return wait_status_;
  int status = 0;
  pid_t r = WaitPid(pid_, &status, WNOHANG);
  if (r == pid_) {
    Reaped(status);
    return status;
  }
  if (r < 0 && errno == ECHILD) {  // not ours to reap any more
    pid_ = -1;
    pidfd_.Reset();
  }
  return std::nullopt;
}

StatusOr<int> ChildProcess::Wait(std::optional<Clock::time_point> deadline) {
  if (pid_ <= 0) {
    if (wait_status_) return *wait_status_;
    return Status(ErrorCode::kUnavailable, "no child process to wait for");
  }
  const pid_t pid = pid_;
  for (;;) {
    if (std::optional<int> status = TryReap()) return *status;
    if (pid_ <= 0) return ReapedElsewhere(pid);
    if (!deadline) {
      int status = 0;
      if (WaitPid(pid_, &status, 0) == pid_) {
        Reaped(status);
        return status;
      }
      pid_ = -1;
      pidfd_.Reset();
      return ReapedElsewhere(pid);
    }
    auto left = *deadline - Clock::now();
    if (left <= Clock::duration::zero()) {
      return Status(ErrorCode::kTimeout, "child process " + std::to_string(pid) +
                                             " is still running at the deadline");
    }
    if (pidfd_) {
      PollExit(pidfd_.get(), left);
    } else {
      // No pidfd to wait on: look again every millisecond.
      auto nap = std::min<Clock::duration>(left, std::chrono::milliseconds(1));
      timespec ts{0, static_cast<long>(std::chrono::nanoseconds(nap).count())};
      ::nanosleep(&ts, nullptr);
    }
  }
}

void ChildProcess::KillAndReap() {
  if (pid_ <= 0) return;
  Kill();
  (void)Wait();
}

void ChildProcess::Reaped(int status) {
  wait_status_ = status;
  pid_ = -1;
  pidfd_.Reset();
}

std::string DescribeWaitStatus(int status) {
  std::ostringstream out;
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = ::sigabbrev_np(sig);
    out << "killed by signal " << sig;
    if (name != nullptr) out << " (SIG" << name << ")";
  } else if (WIFEXITED(status)) {
    out << "exited with status " << WEXITSTATUS(status);
  } else {
    out << "ended with wait status " << status;
  }
  return out.str();
}

StatusOr<pid_t> SpawnWithStdio(const std::vector<std::string>& argv,
                               const std::vector<std::string>* env, int io) {
  if (argv.empty()) return Status(ErrorCode::kInvalidArgument, "nothing to run");
  // dup2 onto itself would keep FD_CLOEXEC: give the child a copy off 0-2.
  UniqueFd above;
  if (io <= STDERR_FILENO) {
    above.Reset(::fcntl(io, F_DUPFD_CLOEXEC, STDERR_FILENO + 1));
    if (!above) return IoError(std::string("fcntl: ") + ::strerror(errno));
    io = above.get();
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&actions, io, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, io, STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  sigset_t all;
  sigset_t none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETSIGMASK);
  auto terminated = [](const std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
    out.push_back(nullptr);
    return out;
  };
  std::vector<char*> args = terminated(argv);
  std::vector<char*> envp;
  if (env != nullptr) envp = terminated(*env);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, args[0], &actions, &attr, args.data(),
                         env != nullptr ? envp.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return IoError("cannot run " + argv[0] + ": " + ::strerror(rc));
  return pid;
}

}  // namespace dolsot
