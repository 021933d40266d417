// ForkProcess: CPython's fork hooks around fork(), as an engine fork, the
// child in a process group of its own.
#include <Python.h>

#include "backend_subprocess/engine_fork.h"

#include <unistd.h>

#include <cerrno>

#include "backend_subprocess/fork_guard.h"

namespace dolsot {

int ForkProcess() {
  fork_guard::EngineFork engine;  // our children get what we pass on purpose
  PyOS_BeforeFork();
  pid_t pid = ::fork();
  if (pid == 0) {
    PyOS_AfterFork_Child();
    ::setpgid(0, 0);
    return 0;
  }
  int saved = errno;
  PyOS_AfterFork_Parent();
  if (pid > 0) ::setpgid(pid, pid);  // both sides, so no kill can race it
  errno = saved;
  return pid;
}

}  // namespace dolsot
