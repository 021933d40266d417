// Pids across a PID namespace: a sandboxed worker and its sessions name
// themselves by the pids of their own namespace (the worker is pid 1); the
// host signals and watches them by its own. The host translates through
// /proc (NSpid in /proc/<pid>/status), only when a process is first vouched
// for (a session opened, a branch, a promoted runner), never per cell.
#pragma once

#include <sys/types.h>

#include <optional>
#include <vector>

namespace dolsot {

// The children of `pid` (of every thread), from /proc/<pid>/task/*/children,
// or from every process's parent link where the kernel keeps no such lists;
// none when it is gone.
std::vector<pid_t> ChildPids(pid_t pid);

// The pid host process `pid` has in its innermost PID namespace (its own
// pid when it is in the host's); nullopt when it is gone.
std::optional<pid_t> InnermostPid(pid_t pid);

// The host pid of a descendant of `ancestor` (at most `depth` generations
// down) whose innermost pid is `inner`; nullopt when there is none.
std::optional<pid_t> DescendantByInnermostPid(pid_t ancestor, pid_t inner, int depth);

}  // namespace dolsot
