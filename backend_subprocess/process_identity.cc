// Vouching for session processes and signalling them (see process_identity.h).
#include "backend_subprocess/process_identity.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "backend_subprocess/namespaced_pids.h"
#include "core/child_process.h"
#include "core/unique_fd.h"

namespace dolsot {
namespace {

// What /proc/<pid>/stat says about a process.
struct ProcStat {
  pid_t ppid = 0;
  pid_t pgrp = 0;
  std::uint64_t start_ticks = 0;  // clock ticks after boot
  char state = '?';               // R, S, D, Z (exited, not reaped), ...
};

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file) return std::nullopt;
  char buf[1024];
  ssize_t n;
  do {
    n = ::read(file.get(), buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  // The command name may hold anything, ')' included: fields start after
  // the last ')'. Then: state ppid pgrp ... starttime (the 19th number).
  char* close = std::strrchr(buf, ')');
  if (close == nullptr || close[1] != ' ' || close[2] == '\0') return std::nullopt;
  const char state = close[2];
  char* at = close + 3;  // past ") " and the state letter
  unsigned long long fields[19];
  for (auto& field : fields) {
    char* end;
    errno = 0;
    field = std::strtoull(at, &end, 10);
    if (end == at || errno != 0) return std::nullopt;
    at = end;
  }
  ProcStat stat;
  stat.ppid = static_cast<pid_t>(fields[0]);
  stat.pgrp = static_cast<pid_t>(fields[1]);
  stat.start_ticks = fields[18];
  stat.state = state;
  return stat;
}

std::int64_t TicksToNs(std::uint64_t ticks) {
  static const long hz = ::sysconf(_SC_CLK_TCK);
  return static_cast<std::int64_t>(ticks) * (1'000'000'000 / (hz > 0 ? hz : 100));
}

// The check, returning what /proc said of the process when it passes.
StatusOr<ProcStat> Checked(pid_t pid, std::int64_t vouched_at_ns) {
  std::string who = "pid " + std::to_string(pid);
  if (pid <= 1) return InvalidArgument(who + " is no session process");
  if (pid == ::getpid()) return InvalidArgument(who + " is this process");
  if (pid == ::getpgrp()) return InvalidArgument(who + " leads this process's group");
  std::optional<ProcStat> stat = ReadProcStat(pid);
  if (!stat) return Status(ErrorCode::kUnavailable, who + " is gone");
  if (TicksToNs(stat->start_ticks) > vouched_at_ns) {
    return InvalidArgument(who + " started after it was vouched for: another process took it");
  }
  return *stat;
}

}  // namespace

std::int64_t BootTimeNs() {
  timespec now{};
  ::clock_gettime(CLOCK_BOOTTIME, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

Status CheckKillable(pid_t pid, std::int64_t vouched_at_ns) {
  return Checked(pid, vouched_at_ns).status();
}

ProcessIdentity ProcessIdentity::Trusted(pid_t pid, pid_t namespace_pid) {
  ProcessIdentity out(pid, BootTimeNs());
  if (namespace_pid > 1 && namespace_pid != pid) out.namespace_pid_ = namespace_pid;
  return out;
}

StatusOr<ProcessIdentity> ProcessIdentity::FromSender(const protocol::Frame& frame, pid_t claimed,
                                                      const char* what) {
  if (claimed > 1 && frame.sender == claimed) return ProcessIdentity(claimed, BootTimeNs());
  // A sandboxed session names itself by its namespace's pid; the kernel
  // attests the host's. They must be one process.
  std::int64_t now = BootTimeNs();
  if (claimed > 1 && frame.sender > 1 && InnermostPid(frame.sender) == claimed) {
    ProcessIdentity out(frame.sender, now);
    out.namespace_pid_ = claimed;
    return out;
  }
  return CorruptError(std::string(what) + " names pid " + std::to_string(claimed) +
                      " as its sender, but the kernel says pid " +
                      std::to_string(frame.sender) + " sent it");
}

ProcessIdentity ProcessIdentity::ChildOf(const ProcessIdentity& parent, pid_t child) {
  // Vouched for as of before the look: the child existed by then (its
  // parent named it in a frame already read).
  std::int64_t now = BootTimeNs();
  if (!parent.known() || child <= 1) return ProcessIdentity();
  if (parent.namespace_pid_ == 0) {
    std::optional<ProcStat> stat = ReadProcStat(child);
    if (!stat || stat->ppid != parent.pid_ || stat->pgrp != child) return ProcessIdentity();
    return ProcessIdentity(child, now);
  }
  // In a sandbox: the parent's child that its namespace calls `child`.
  std::optional<pid_t> host = DescendantByInnermostPid(parent.pid_, child, 1);
  if (!host) return ProcessIdentity();
  std::optional<ProcStat> stat = ReadProcStat(*host);
  if (!stat || stat->ppid != parent.pid_ || stat->pgrp != *host) return ProcessIdentity();
  ProcessIdentity out(*host, now);
  out.namespace_pid_ = child;
  return out;
}

bool ProcessIdentity::Exited() const {
  if (!known()) return false;
  errno = 0;
  std::optional<ProcStat> stat = ReadProcStat(pid_);
  // Reaped (no /proc entry); any other failure (out of descriptors, above
  // all) says nothing of the process: not exited, as far as can be told.
  if (!stat) return errno == ENOENT || errno == ESRCH;
  // Its pid names a process that started since: this one is gone.
  if (TicksToNs(stat->start_ticks) > vouched_at_ns_) return true;
  return stat->state == 'Z' || stat->state == 'X';
}

UniqueFd ProcessIdentity::Pin() const {
  if (!known()) return UniqueFd();
  UniqueFd pidfd = OpenPidfd(pid_);
  // Opened first: if the pid is still this process's now, the pidfd was.
  if (!pidfd || Exited()) return UniqueFd();
  return pidfd;
}

bool ProcessIdentity::Kill() const {
  if (!known()) return false;
  UniqueFd pidfd = OpenPidfd(pid_);  // pins the process /proc is about to describe
  auto stat = Checked(pid_, vouched_at_ns_);
  if (!stat.ok()) return false;
  // Still not reaped, so the pidfd and /proc described the same process, and
  // the group id it leads cannot name another group.
  if (pidfd && SendSignal(pidfd.get(), pid_, 0) != 0) return false;
  if (stat->pgrp == pid_) ::kill(-pid_, SIGKILL);
  return SendSignal(pidfd.get(), pid_, SIGKILL) == 0;
}

}  // namespace dolsot
