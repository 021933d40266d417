// ForkProcess: CPython's fork hooks around fork(), as an engine fork, the
// child in a process group of its own; ForkKeeper / ForkFromKeeper split
// them around a keeper that runs no Python (see engine_fork.h).
#include <Python.h>

#include "backend_subprocess/engine_fork.h"

#include <unistd.h>

#include <cerrno>

#include "backend_subprocess/fork_guard.h"

namespace dolsot {
namespace {

// `python_child`: whether the child does CPython's child-side work.
int Fork(bool python_parent, bool python_child) {
  fork_guard::EngineFork engine;  // our children get what we pass on purpose
  if (python_parent) PyOS_BeforeFork();
  pid_t pid = ::fork();
  if (pid == 0) {
    if (python_child) PyOS_AfterFork_Child();
    ::setpgid(0, 0);
    return 0;
  }
  int saved = errno;
  if (python_parent) PyOS_AfterFork_Parent();
  if (pid > 0) ::setpgid(pid, pid);  // both sides, so no kill can race it
  errno = saved;
  return pid;
}

}  // namespace

int ForkProcess() { return Fork(/*python_parent=*/true, /*python_child=*/true); }

int ForkDeferringPython() { return Fork(/*python_parent=*/true, /*python_child=*/false); }

void FinishDeferredFork() { PyOS_AfterFork_Child(); }

int ForkKeeper() { return Fork(/*python_parent=*/true, /*python_child=*/false); }

int ForkFromKeeper() { return Fork(/*python_parent=*/false, /*python_child=*/true); }

}  // namespace dolsot
