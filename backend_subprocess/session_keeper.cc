// The session keeper (see session_keeper.h).
#include <Python.h>

#include "backend_subprocess/session_keeper.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend_subprocess/engine_fork.h"
#include "backend_subprocess/exit_records.h"
#include "backend_subprocess/namespaced_pids.h"

namespace dolsot {
namespace {

// A sweep kills a tree level by level (a killed process's children come to
// the keeper); a tree deeper than this, or a fork bomb racing it, is left to
// the session's end and the sandbox's process cap.
constexpr int kSweepRounds = 256;

// Reaps every child that has exited, recording how.
void ReapExited() {
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) exit_records::Record(pid, status);
}

// Whether process `pid` holds a descriptor of the socket with inode `inode`.
// A process whose descriptors cannot be read counts as holding it: the
// keeper never kills what it cannot tell from the engine's own.
bool HoldsSocket(pid_t pid, ino_t inode) {
  std::string dir_path = "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = ::opendir(dir_path.c_str());
  if (dir == nullptr) return errno != ENOENT;
  const std::string wanted = "socket:[" + std::to_string(inode) + "]";
  bool holds = false;
  char target[64];
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    ssize_t n = ::readlinkat(::dirfd(dir), entry->d_name, target, sizeof(target) - 1);
    if (n <= 0) continue;
    if (wanted.compare(0, std::string::npos, target, static_cast<std::size_t>(n)) == 0) {
      holds = true;
      break;
    }
  }
  ::closedir(dir);
  return holds;
}

// Kills every child of this process that `spare` does not keep (and their
// children as they come here), reaping each.
template <typename Spare>
void KillChildren(Spare spare) {
  for (int round = 0; round < kSweepRounds; ++round) {
    ReapExited();
    std::vector<pid_t> victims;
    for (pid_t child : ChildPids(::getpid())) {
      if (!spare(child)) victims.push_back(child);
    }
    if (victims.empty()) return;
    for (pid_t p : victims) ::kill(p, SIGKILL);
    for (pid_t p : victims) {
      int status = 0;
      pid_t reaped;
      while ((reaped = ::waitpid(p, &status, 0)) < 0 && errno == EINTR) {
      }
      if (reaped == p) exit_records::Record(p, status);
    }
  }
}

// Answers a sweep's asker on the descriptor its request carried.
void Answer(int reply) {
  char done = 1;
  (void)::send(reply, &done, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  ::close(reply);
}

// One byte and at most one descriptor (SCM_RIGHTS), the shape of every
// message on the keeper's channels. Returns false unless the byte went.
bool SendByteWithFd(int socket, char byte, int fd, int flags) {
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  ssize_t sent;
  do {
    sent = ::sendmsg(socket, &msg, MSG_NOSIGNAL | flags);
  } while (sent < 0 && errno == EINTR);
  return sent == 1;
}

// Receives one such message: 1 with the descriptor it carried (closed
// beyond the first; empty when none came or it was cut), 0 when every
// sender is gone, -1 on an error (EAGAIN with MSG_DONTWAIT included).
int ReceiveByteWithFd(int socket, int flags, UniqueFd* fd) {
  char byte;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | flags);
  } while (n < 0 && errno == EINTR && !(flags & MSG_DONTWAIT));
  if (n <= 0) return n == 0 ? 0 : -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int received;
      std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (!*fd) {
        fd->Reset(received);
      } else {
        ::close(received);
      }
    }
  }
  if (msg.msg_flags & MSG_CTRUNC) fd->Reset();
  return 1;
}

// Reads one request from the session end's peer. Returns false when every
// holder of the session end is gone.
bool ServeRequest(int keeper_end, ino_t link_inode) {
  UniqueFd reply;
  int got = ReceiveByteWithFd(keeper_end, MSG_DONTWAIT, &reply);
  if (got < 0) return errno == EINTR || errno == EAGAIN;
  if (got == 0) return false;
  // Anything from a holder of the session end asks for a sweep: at worst a
  // cell sweeps its own lineage's processes, which it could kill anyway.
  KillChildren([link_inode](pid_t child) { return HoldsSocket(child, link_inode); });
  if (reply) Answer(reply.Release());
  return true;
}

// Closes every descriptor but stdin, stdout, stderr and `keep`: the keeper
// must hold no copy of the session's socket (the host would not see its
// runner die), nor anything else of the worker's.
void CloseAllBut(std::initializer_list<int> keep) {
  std::vector<int> open;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      int fd = std::atoi(entry->d_name);
      if (fd != ::dirfd(dir)) open.push_back(fd);
    }
    ::closedir(dir);
  } else {
    for (int fd = 3; fd < 1024; ++fd) open.push_back(fd);
  }
  for (int fd : open) {
    if (fd <= 2 || std::find(keep.begin(), keep.end(), fd) != keep.end()) continue;
    ::close(fd);
  }
}

[[noreturn]] void RunKeeper(UniqueFd keeper_end, ino_t link_inode) {
  sigset_t child_signals;
  sigemptyset(&child_signals);
  sigaddset(&child_signals, SIGCHLD);
  UniqueFd exits(::signalfd(-1, &child_signals, SFD_CLOEXEC | SFD_NONBLOCK));
  for (;;) {
    ReapExited();
    pollfd p[2] = {{keeper_end.get(), POLLIN, 0}, {exits.get(), POLLIN, 0}};
    int r = ::poll(p, exits ? 2 : 1, exits ? -1 : 1000);  // without a signalfd: reap each second
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (exits && (p[1].revents & POLLIN)) {
      signalfd_siginfo info;
      while (::read(exits.get(), &info, sizeof(info)) == sizeof(info)) {
      }
    }
    if (p[0].revents & POLLIN) {
      if (!ServeRequest(keeper_end.get(), link_inode)) break;
    } else if (p[0].revents & (POLLHUP | POLLERR | POLLNVAL)) {
      break;
    }
  }
  // The lineage is over: nothing it started may outlive it.
  KillChildren([](pid_t) { return false; });
  ::_exit(0);
}

}  // namespace

UniqueFd BecomeKeeper(int report_fd, const SessionWalls* walls) {
  if (walls != nullptr) {
    // Before anything of the session exists: all of it is inside.
    Status walled = ApplySessionWalls(*walls);
    if (!walled.ok()) {
      std::string line = "dolsot: a session's walls: " + walled.message() + "\n";
      (void)!::write(2, line.data(), line.size());
      ::_exit(3);
    }
  }
  int pair[2];
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0 ||
      ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    ::_exit(3);
  }
  UniqueFd keeper_end(pair[0]), link(pair[1]);
  struct stat link_stat {};
  if (::fstat(link.get(), &link_stat) != 0) ::_exit(3);
  // Blocked before the first process exists, so no exit goes unnoticed
  // (the signalfd reads what is pending); unblocked again in that process.
  sigset_t child_signals, old;
  sigemptyset(&child_signals);
  sigaddset(&child_signals, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &child_signals, &old);
  int pid = ForkFromKeeper();  // the keeper ran no Python: its child does the child's part
  if (pid == 0) {
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    exit_records::Detach();  // the cells run here: they must not write the ring
    ::close(report_fd);
    return link;
  }
  if (pid < 0) ::_exit(3);
  link.Reset();
  CloseAllBut({keeper_end.get(), report_fd});
  auto first = static_cast<std::uint32_t>(pid);
  if (::write(report_fd, &first, sizeof(first)) != static_cast<ssize_t>(sizeof(first))) {
    ::kill(pid, SIGKILL);  // the worker cannot hand it to the host
  }
  ::close(report_fd);
  RunKeeper(std::move(keeper_end), link_stat.st_ino);
}

UniqueFd AwaitSessionSocket(UniqueFd command) {
  UniqueFd socket;
  int got = ReceiveByteWithFd(command.get(), 0, &socket);
  if (got <= 0) ::_exit(0);  // let go, or the worker stopped
  if (!socket) ::_exit(3);
  return socket;
}

bool HandSessionSocket(int command, int session_socket) {
  return SendByteWithFd(command, 'O', session_socket, MSG_DONTWAIT);
}

pid_t AwaitReportedPid(int fd, int patience_ms) {
  auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(patience_ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        give_up - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready != 1) return -1;
    std::uint32_t pid = 0;
    ssize_t n;
    do {
      n = ::read(fd, &pid, sizeof(pid));
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(sizeof(pid)) || pid <= 1) return -1;
    return static_cast<pid_t>(pid);
  }
}

void AwaitSweep(int link, int patience_ms) {
  if (link < 0) return;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return;
  UniqueFd mine(pair[0]), theirs(pair[1]);
  bool sent = SendByteWithFd(link, 'S', theirs.get(), 0);
  theirs.Reset();
  if (!sent) return;  // the keeper is gone
  pollfd p{mine.get(), POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, patience_ms);
  } while (r < 0 && errno == EINTR);
}

}  // namespace dolsot
