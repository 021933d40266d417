// ForkProcess: how the engine forks a process of its own (a session's first
// process, a runner's snapshot, a checkpoint writer, a branch); ForkKeeper
// and ForkFromKeeper: a session's keeper, which runs no Python, and the
// first process it forks.
#pragma once

namespace dolsot {

// Forks while single-threaded-safe for CPython (PyOS_BeforeFork/AfterFork_*),
// as an engine fork (fork_guard.h: the child keeps the descriptors passed on
// on purpose). The child gets its own process group. Returns the child's pid
// in the parent, 0 in the child, -1 (errno set) on failure. Needs the GIL.
int ForkProcess();

// A session's keeper (session_keeper.h) runs C++ only, so it skips
// CPython's child-side fork work (PyOS_AfterFork_Child and the at-fork
// hooks, which ran Python there and wrote ~0.7 MB of the worker's pages a
// session): ForkKeeper is ForkProcess in the parent (the worker; needs the
// GIL) and a bare fork in the child, which must not touch Python at all.
// The keeper then forks the session's first process with ForkFromKeeper:
// a bare fork whose child does CPython's child-side work, so that process
// starts from the worker's interpreter exactly as a direct child of the
// worker would (the keeper changed none of it). Both: own process group,
// an engine fork, the pid / 0 / -1 as ForkProcess.
int ForkKeeper();
int ForkFromKeeper();

// A runner's snapshot waits, most often for the session's whole life,
// running no Python; CPython's child-side fork work (PyOS_AfterFork_Child
// and the at-fork hooks: threading's, once dill imported it, runs Python
// that wrote ~0.8 MB of pages, each then held twice, by the snapshot and by
// its runner) is left to FinishDeferredFork, which the child calls before
// it runs Python (when it is promoted). Until then it may only wait on
// descriptors, without releasing the GIL (it is the only thread, and the
// GIL's lock is as the fork left it). ForkProcess in the parent (needs the
// GIL); same returns.
int ForkDeferringPython();
void FinishDeferredFork();

}  // namespace dolsot
