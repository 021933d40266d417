// dolsot-worker: the worker executable for C++ hosts and the CLI. Embeds
// CPython and runs the fork-server loop on the socket named by DOLSOT_WORKER_FD.
#include <Python.h>

#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "backend_subprocess/worker_loop.h"
#include "backend_subprocess/worker_process.h"
#include "backend_subprocess/worker_settings.h"
#include "embedded/interpreter.h"

#ifndef DOLSOT_BUILD_PYTHON_EXECUTABLE
#define DOLSOT_BUILD_PYTHON_EXECUTABLE ""
#endif

namespace {

// This program's own path.
std::string SelfPath() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace

int main(int argc, char** argv) {
  int fd = dolsot::WorkerFdFromEnvironment();
  if (fd < 0) {
    std::fprintf(stderr,
                 "dolsot-worker: error: %s is not set; this program is started by a dolsot "
                 "host, not by hand\n",
                 dolsot::kWorkerFdVariable);
    return 2;
  }
  dolsot::InterpreterOptions options;
  options.program_name = dolsot::WorkerInterpreter(SelfPath(), DOLSOT_BUILD_PYTHON_EXECUTABLE);
  options.main_thread = dolsot::PythonMainThread::kCallingThread;  // signals, forks
  // Held for the process's life: neither the worker nor a session it forks
  // releases it (they end with _exit), so nothing here ever finalizes.
  auto interpreter = dolsot::AcquireInterpreter(options);
  if (!interpreter.ok()) {
    std::fprintf(stderr, "dolsot-worker: error: %s\n", interpreter.status().message().c_str());
    return 1;
  }
  PyGILState_Ensure();  // the fork-server loop runs Python on this thread
  int rc = dolsot::RunWorker(fd);
  // Sessions never get here; the worker itself exits without finalizing
  // (toolbox threads may still run).
  std::fflush(stderr);
  ::_exit(rc);
}
