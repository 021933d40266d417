#include "cli/kernel_command.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "backend_subprocess/worker_process.h"
#include "cli/worker_locator.h"
#include "core/exit_codes.h"

#ifndef DOLSOT_BUILD_TREE_WORKER
#define DOLSOT_BUILD_TREE_WORKER ""
#endif
#ifndef DOLSOT_BUILD_PYTHON_EXECUTABLE
#define DOLSOT_BUILD_PYTHON_EXECUTABLE ""
#endif

namespace dolsot::cli {
namespace {

// The interpreter whose environment holds the dolsot package: the one the
// sessions' workers run (repl_backend.cc finds it the same way): the wheel's
// dolsot-worker console script names it on its #! line; else python3 beside
// the worker (a venv's bin/), else the interpreter this build was made with.
std::string PackageInterpreter() {
  auto worker = FindWorker(WorkerCandidates(CurrentExecutablePath(), DOLSOT_BUILD_TREE_WORKER));
  if (!worker) return WorkerInterpreter("", DOLSOT_BUILD_PYTHON_EXECUTABLE);
  std::string python = ScriptInterpreter(*worker);
  if (python.empty()) python = WorkerInterpreter(*worker, DOLSOT_BUILD_PYTHON_EXECUTABLE);
  return python;
}

}  // namespace

int KernelCommand(int argc, char** argv, std::ostream& err) {
  const std::string python = PackageInterpreter();
  if (python.empty()) {
    err << "dolsot: error: kernel: found no Python interpreter with the dolsot package (looked at "
           "the dolsot-worker beside this program and the interpreter it was built with); run "
           "`python -m dolsot.kernel` with the Python dolsot is installed in\n";
    return kExitUsage;
  }
  const std::string self = CurrentExecutablePath();
  // The kernel runs its cells with this very CLI (same release, same
  // server), not whichever `dolsot` is first on PATH.
  if (!self.empty()) ::setenv("DOLSOT_CLI", self.c_str(), 1);
  std::vector<char*> args{const_cast<char*>(python.c_str()), const_cast<char*>("-m"),
                          const_cast<char*>("dolsot.kernel")};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  err.flush();
  ::execv(python.c_str(), args.data());
  err << "dolsot: error: kernel: cannot start " << python << ": " << std::strerror(errno) << "\n";
  return kExitUsage;
}

}  // namespace dolsot::cli
