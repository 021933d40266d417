// ForkProcess: how the engine forks a process of its own (a session's first
// process, a runner's snapshot, a checkpoint writer, a branch, a keeper).
#pragma once

namespace dolsot {

// Forks while single-threaded-safe for CPython (PyOS_BeforeFork/AfterFork_*),
// as an engine fork (fork_guard.h: the child keeps the descriptors passed on
// on purpose). The child gets its own process group. Returns the child's pid
// in the parent, 0 in the child, -1 (errno set) on failure. Needs the GIL.
int ForkProcess();

}  // namespace dolsot
