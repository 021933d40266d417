// ProcessIdentity: a session process (a runner) as far as the host can vouch
// for it, and the only way the host signals one.
//
// Which side is trusted. The worker (the fork server) ran no cell: it
// imported the toolboxes the host chose, so the pid it reports for a fresh
// session process (OPENED) is taken as given. Every session process has run
// the user's cells (a snapshot is a copy of a runner that ran them), and a
// cell can write any frame on its socket, so the pids sessions report are
// checked:
//   - RESULT names its sender, the runner, and so does the RUNNER frame of a
//     promoted snapshot. The host's end of a session socket asks the kernel
//     for each writer's credentials (SO_PASSCRED): the pid the kernel attests
//     for every byte of the frame must be the pid it names (FromSender),
//     else the frame is kCorrupt. A promoted snapshot is vouched for as of
//     its promotion (VouchedAsOf): it existed then.
//   - BRANCHED names a child of its sender, a process the host already
//     vouched for: /proc must show the named process as that process's
//     child, leading its own process group (ChildOf), else the pid is not
//     recorded and never signalled (the process still ends when its socket
//     closes).
// Snapshots are never signalled by the host: idle, they exit when their
// socket closes, and their runner kills and reaps the ones it retires.
// Each identity keeps the moment the host vouched for it (CLOCK_BOOTTIME).
//
// Kill() checks again just before it signals, because a pid names another
// process once the first is reaped: the pid is not 0, 1, the host or the
// host's process group; /proc shows a process that started no later than
// the moment it was vouched for (a process that took the pid since started
// after); a pidfd opened before that look pins the process it read (a
// kernel before 5.3 has no pidfd: the look and the kill are then a few
// microseconds apart). The process is SIGKILLed through that pidfd, and its
// process group only while the process still leads it.
//
// Why not "a descendant of this Repl's worker": when the worker dies, live
// sessions go on (reparented to init), and a runaway cell must still be
// killable; the start time pins a pid without walking the process tree.
// What is left to a cell is naming its own processes (a process it forked
// and gave the socket to may write a RESULT, attested as its own), which it
// could signal itself. A cell with CAP_SYS_ADMIN can forge credentials, and
// can also signal any process by itself.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "backend_subprocess/protocol.h"
#include "core/status.h"
#include "core/unique_fd.h"

namespace dolsot {

class ProcessIdentity {
 public:
  ProcessIdentity() = default;  // unknown: signals nothing

  // `pid` as the trusted worker reported it, vouched for now. For a
  // sandboxed worker, `pid` is the host's and `namespace_pid` the worker's.
  static ProcessIdentity Trusted(pid_t pid, pid_t namespace_pid = 0);
  // The sender of `frame`, which names `claimed` as itself: kCorrupt (naming
  // `what`) unless the kernel attests that `claimed` wrote all of it (in a
  // sandbox: that the writer's pid in its own namespace is `claimed`).
  static StatusOr<ProcessIdentity> FromSender(const protocol::Frame& frame, pid_t claimed,
                                              const char* what);
  // `child`, as named by `parent` (in its namespace): known only when /proc
  // shows it as `parent`'s child leading its own process group.
  static ProcessIdentity ChildOf(const ProcessIdentity& parent, pid_t child);

  // This identity, vouched for as of `ns` when that is earlier: a process
  // the host knew existed at `ns` (a snapshot it promoted then) whose pid it
  // learned later. A process that took the pid after `ns` is never signalled.
  ProcessIdentity VouchedAsOf(std::int64_t ns) const {
    ProcessIdentity out(pid_, ns < vouched_at_ns_ ? ns : vouched_at_ns_);
    out.namespace_pid_ = namespace_pid_;
    return out;
  }

  bool known() const { return pid_ > 1; }
  pid_t pid() const { return pid_; }
  // The pid the session's own namespace knows it by (the worker's view,
  // what its frames name); pid() outside a sandbox.
  pid_t namespace_pid() const { return namespace_pid_ > 1 ? namespace_pid_ : pid_; }
  std::int64_t vouched_at_ns() const { return vouched_at_ns_; }

  // Whether the process is known to have exited: reaped, a zombie, or its
  // pid taken by a process that started after it was vouched for. Unlike
  // the end of its socket, which a process it has just forked may still
  // hold for a moment, this is the process itself. False when unknown.
  bool Exited() const;

  // A pidfd on this process, opened and then checked against Exited(): it
  // names this process, not a later one of the same pid, and polls readable
  // once the process exits, with no /proc read. Empty when the process has
  // exited, is unknown, or the kernel has no pidfds (before Linux 5.3).
  UniqueFd Pin() const;

  // SIGKILLs the process and, while it leads it, its process group, once the
  // checks above pass. False when nothing was signalled.
  bool Kill() const;

  // For tests: an identity vouched for at `vouched_at_ns` (CLOCK_BOOTTIME).
  static ProcessIdentity ForTesting(pid_t pid, std::int64_t vouched_at_ns) {
    return ProcessIdentity(pid, vouched_at_ns);
  }

 private:
  ProcessIdentity(pid_t pid, std::int64_t vouched_at_ns)
      : pid_(pid > 1 ? pid : -1), vouched_at_ns_(vouched_at_ns) {}

  pid_t pid_ = -1;
  pid_t namespace_pid_ = 0;  // 0: the same as pid_
  std::int64_t vouched_at_ns_ = 0;
};

// The kill-time check alone: OK when `pid` may be signalled as a session
// process vouched for at `vouched_at_ns`; otherwise why not (kUnavailable
// when no such process exists, kInvalidArgument when it must not be
// signalled).
Status CheckKillable(pid_t pid, std::int64_t vouched_at_ns);

// Now, on the clock /proc's start times count in (CLOCK_BOOTTIME), in ns.
std::int64_t BootTimeNs();

}  // namespace dolsot
