// Spawning, greeting and stopping the worker process.
#include "backend_subprocess/worker_process.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "backend_subprocess/worker_loop.h"

extern char** environ;

namespace dolsot {
namespace {

using protocol::PayloadReader;
using protocol::Tag;

// At most 200 bytes of text from another process, every byte outside
// printable ASCII shown as '?'.
std::string PrintableExcerpt(std::string_view text) {
  constexpr std::size_t kMax = 200;
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < kMax; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  }
  if (text.size() > kMax) out += "...";
  return out.empty() ? "no message" : "\"" + out + "\"";
}

constexpr int kChildChannelFd = 3;

bool IsExecutable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::string SelfDirectory() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  std::string path(buf, static_cast<std::size_t>(n));
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

// Waits up to `timeout_ms` for `pid` (our child) to exit; true when reaped.
bool ReapWithin(pid_t pid, int timeout_ms) {
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    int r;
    do {
      r = ::poll(&p, 1, timeout_ms);
    } while (r < 0 && errno == EINTR);
    ::close(pidfd);
    if (r <= 0) return false;
  }
  pid_t r;
  do {
    r = ::waitpid(pid, nullptr, pidfd >= 0 ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  return r == pid || (r < 0 && errno == ECHILD);
}

StatusOr<pid_t> Spawn(const std::vector<std::string>& command,
                      const std::vector<std::string>& extra_env, int channel) {
  if (command.empty()) return InvalidArgument("the worker command is empty");
  // dup2 onto the same number would keep close-on-exec set: move it first.
  UniqueFd moved;
  if (channel == kChildChannelFd) {
    moved.Reset(::fcntl(channel, F_DUPFD_CLOEXEC, 10));
    if (!moved) return IoError(std::string("fcntl: ") + std::strerror(errno));
    channel = moved.get();
  }
  std::vector<std::string> env_strings;
  std::string fd_var = std::string(kWorkerFdVariable) + "=";
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, fd_var.c_str(), fd_var.size()) == 0) continue;
    env_strings.emplace_back(*e);
  }
  for (const auto& e : extra_env) env_strings.push_back(e);
  env_strings.push_back(fd_var + std::to_string(kChildChannelFd));
  std::vector<char*> envp, argv;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = command;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, channel, kChildChannelFd);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGCHLD, SIGPIPE}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  // Its own process group: a Ctrl-C at the host's terminal does not reach it.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return Status(ErrorCode::kUnavailable,
                  "cannot start the worker '" + command[0] + "': " + std::strerror(rc));
  }
  return pid;
}

}  // namespace

std::string WorkerInterpreter(const std::string& worker_path, const std::string& built_with) {
  std::string::size_type slash = worker_path.rfind('/');
  if (slash != std::string::npos) {
    for (const char* name : {"python3", "python"}) {
      std::string candidate = worker_path.substr(0, slash + 1) + name;
      if (IsExecutable(candidate)) return candidate;
    }
  }
  if (!built_with.empty() && IsExecutable(built_with)) return built_with;
  return "";
}

std::vector<std::string> DefaultWorkerCommand() {
  std::vector<std::string> candidates;
  std::string self = SelfDirectory();
  if (!self.empty()) candidates.push_back(self + "/dolsot-worker");
#if defined(DOLSOT_BUILD_TREE) && defined(DOLSOT_WORKER_BUILD_PATH)
  // A program of this build tree (a test, say) takes the worker built with
  // it: an installed one may be of another version (another protocol).
  char resolved[PATH_MAX];
  std::string tree = ::realpath(DOLSOT_BUILD_TREE, resolved) != nullptr ? resolved : DOLSOT_BUILD_TREE;
  tree += "/";
  if (!self.empty() && (self + "/").compare(0, tree.size(), tree) == 0) {
    candidates.push_back(DOLSOT_WORKER_BUILD_PATH);
  }
#endif
#ifdef DOLSOT_WORKER_INSTALL_PATH
  candidates.push_back(DOLSOT_WORKER_INSTALL_PATH);
#endif
#ifdef DOLSOT_WORKER_BUILD_PATH
  candidates.push_back(DOLSOT_WORKER_BUILD_PATH);
#endif
  for (const auto& c : candidates) {
    if (IsExecutable(c)) return {c};
  }
  return {"dolsot-worker"};  // left to PATH; a clear error if absent
}

StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Start(
    const std::vector<std::string>& command, const std::vector<std::string>& extra_env,
    const WorkerSettings& settings, protocol::Deadline deadline) {
  auto pair = protocol::SocketPair();
  if (!pair.ok()) return pair.status();
  auto pid = Spawn(command, extra_env, pair->second.get());
  if (!pid.ok()) return pid.status();
  pair->second.Reset();
  std::unique_ptr<WorkerProcess> worker(new WorkerProcess(std::move(pair->first), *pid));
  Status sent = protocol::WriteFrame(worker->socket_.get(), Tag::kHello, EncodeHello(settings));
  auto reply = sent.ok() ? protocol::ReadFrame(worker->socket_.get(), deadline)
                         : StatusOr<protocol::Frame>(sent);
  if (!reply.ok()) {
    std::string why = reply.status().code() == ErrorCode::kTimeout
                          ? "did not answer before the deadline"
                          : "exited during startup (" + reply.status().message() + ")";
    return Status(ErrorCode::kUnavailable, "the worker '" + command[0] + "' " + why);
  }
  if (reply->tag == Tag::kHelloError) {
    PayloadReader r(reply->payload);
    auto code = static_cast<ErrorCode>(r.U32());
    std::string message = r.Str();
    if (!r.Finish("HELLO_ERROR").ok()) {
      // Workers of protocol 1 sent a refused handshake as bare text: most
      // likely a stale dolsot-worker installed by an older build.
      return Status(ErrorCode::kUnavailable,
                    "the worker '" + command[0] + "' refused the handshake in another protocol (" +
                        PrintableExcerpt(reply->payload) +
                        "); is it a dolsot-worker of another dolsot version?");
    }
    return Status(code == ErrorCode::kInvalidToolbox ? code : ErrorCode::kUnavailable, message);
  }
  if (reply->tag != Tag::kHelloOk) {
    return CorruptError(std::string("the worker answered HELLO with ") + protocol::TagName(reply->tag));
  }
  return worker;
}

WorkerProcess::~WorkerProcess() { Stop(); }

StatusOr<ProcessChannel> WorkerProcess::OpenSession(protocol::Deadline deadline) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (stopped_) return Status(ErrorCode::kUnavailable, "the worker is stopped");
  DOLSOT_RETURN_IF_ERROR(protocol::WriteFrame(socket_.get(), Tag::kOpen, {}));
  auto reply = protocol::ReadFrame(socket_.get(), deadline);
  if (!reply.ok()) {
    if (reply.status().code() == ErrorCode::kTimeout) {
      stopped_ = true;  // the stream is out of step now; never reuse it
    }
    return Status(ErrorCode::kUnavailable, "the worker did not open a session: " +
                                               reply.status().message());
  }
  PayloadReader r(reply->payload);
  ProcessChannel channel;
  channel.pid = static_cast<pid_t>(r.U32());
  if (reply->tag != Tag::kOpened || !r.Finish("OPENED").ok() || !reply->fd) {
    return CorruptError("malformed OPENED frame from the worker");
  }
  channel.socket = std::move(reply->fd);
  return channel;
}

void WorkerProcess::Stop() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (pid_ <= 0) return;
  stopped_ = true;
  (void)protocol::WriteFrame(socket_.get(), Tag::kShutdown, {});
  socket_.Reset();
  if (!ReapWithin(pid_, 5000)) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

}  // namespace dolsot
