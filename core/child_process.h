// ChildProcess: owns one child process of this process (RAII): its pid, a
// pidfd where the kernel has pidfd_open (Linux 5.3+), and its process group
// when it leads one. The one owner type for child processes in dolsot
// (descriptors: unique_fd.h). The destructor kills and reaps: no child
// outlives its owner, and none is left a zombie.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/unique_fd.h"

namespace dolsot {

class ChildProcess {
 public:
  using Clock = std::chrono::steady_clock;

  // Whether the child leads its own process group (spawned with
  // setpgid(0, 0) or POSIX_SPAWN_SETPGROUP): Kill() then signals the whole
  // group, grandchildren included.
  enum class Group { kOwn, kInherited };
  // kPidOnly never opens a pidfd: what a kernel without pidfd_open gives
  // (tests use it to exercise that path).
  enum class Tracking { kPidfdIfAvailable, kPidOnly };

  ChildProcess() = default;
  // Takes ownership of `pid`, a child of this process that is not reaped yet
  // (so its pid cannot be reused while this object holds it).
  static ChildProcess Adopt(pid_t pid, Group group,
                            Tracking tracking = Tracking::kPidfdIfAvailable);
  ~ChildProcess();  // Kill(), then reaps (waits as long as that takes)

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ChildProcess(ChildProcess&& other) noexcept;
  // Kills and reaps the child this object owned before taking `other`'s.
  ChildProcess& operator=(ChildProcess&& other) noexcept;

  // The child's pid; -1 when this owns none (empty, moved from, reaped).
  pid_t pid() const { return pid_; }
  explicit operator bool() const { return pid_ > 0; }
  // A pidfd for the child (readable once it has exited), or -1 without one.
  int pidfd() const { return pidfd_.get(); }
  // The wait status of the reaped child; nullopt before it is reaped.
  std::optional<int> wait_status() const { return wait_status_; }

  // SIGKILLs the child and, when it leads one, its process group. Safe until
  // the child is reaped (until then neither its pid nor its group id can
  // name another process); a no-op after.
  void Kill();
  // Sends `signal` to the child alone. kUnavailable once it is reaped.
  Status Signal(int signal);
  // Waits until the child exits and reaps it: its wait status. kTimeout when
  // `deadline` passes first (the child stays owned and running).
  StatusOr<int> Wait(std::optional<Clock::time_point> deadline = std::nullopt);
  // Reaps the child if it has exited, without waiting: its wait status, or
  // nullopt while it runs.
  std::optional<int> TryReap();

 private:
  ChildProcess(pid_t pid, Group group, UniqueFd pidfd)
      : pid_(pid), group_(group), pidfd_(std::move(pidfd)) {}
  void KillAndReap();
  // Records `status` for the reaped child and forgets its pid.
  void Reaped(int status);

  pid_t pid_ = -1;
  Group group_ = Group::kInherited;
  UniqueFd pidfd_;
  std::optional<int> wait_status_;
};

// A pidfd for `pid` (close-on-exec), or an empty UniqueFd when the kernel
// lacks pidfd_open (before Linux 5.3) or refuses it.
UniqueFd OpenPidfd(pid_t pid);
// Sends `signal` through `pidfd` when it is one (it pins the process: no pid
// reuse race), else to `pid`. 0, or -1 with errno set, as kill(2).
int SendSignal(int pidfd, pid_t pid, int signal);

// Starts `argv` (argv[0] a path) in a process group of its own with `io` as
// its stdin and stdout, stderr /dev/null, every signal default and unblocked
// (a host may ignore SIGPIPE or block signals; its helpers must not inherit
// that), and `env` as its environment (nullptr: this process's). `io` may be
// any descriptor, 0-2 included; this process's copy stays open. The child's
// pid, for the caller to own (ChildProcess::Adopt with Group::kOwn).
StatusOr<pid_t> SpawnWithStdio(const std::vector<std::string>& argv,
                               const std::vector<std::string>* env, int io);

// "exited with status 3", "killed by signal 9 (SIGKILL)": a wait status in
// words, for error messages.
std::string DescribeWaitStatus(int status);

}  // namespace dolsot
