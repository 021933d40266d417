// dolsot-worker: the worker executable for C++ hosts and the CLI. Embeds
// CPython and runs the fork-server loop on the socket named by DOLSOT_WORKER_FD.
#include <Python.h>

#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "backend_subprocess/worker_loop.h"
#include "backend_subprocess/worker_process.h"

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
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.parse_argv = 0;
  config.install_signal_handlers = 1;
  std::string python = dolsot::WorkerInterpreter(SelfPath(), DOLSOT_BUILD_PYTHON_EXECUTABLE);
  PyStatus status = PyStatus_Ok();
  if (!python.empty()) {
    status = PyConfig_SetBytesString(&config, &config.program_name, python.c_str());
  }
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    std::fprintf(stderr, "dolsot-worker: error: cannot start Python: %s\n",
                 status.err_msg ? status.err_msg : "unknown");
    return 1;
  }
  int rc = dolsot::RunWorker(fd);
  // Sessions never get here; the worker itself exits without finalizing
  // (toolbox threads may still run).
  std::fflush(stderr);
  ::_exit(rc);
}
