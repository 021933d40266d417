// WorkerProcess: the host's handle on one worker (fork server) process: spawn
// it with a socket channel, greet it, ask it for session processes, stop it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend_subprocess/process_identity.h"
#include "backend_subprocess/protocol.h"
#include "backend_subprocess/worker_settings.h"
#include "core/child_process.h"
#include "core/unique_fd.h"

namespace dolsot {

// A channel to one process: the host's end of its socket and who is at the
// other end, as far as the host can vouch (process_identity.h).
struct ProcessChannel {
  UniqueFd socket;
  ProcessIdentity process;
};

// The default worker command for C++ hosts: the dolsot-worker executable
// beside the running program; for a host built with find_package(dolsot), the
// installed prefix's (wherever find_package found it); for a program of this
// build tree, the build tree's; else the install path this library was
// configured with, else the build tree's; else "dolsot-worker" on PATH.
std::vector<std::string> DefaultWorkerCommand();

// The interpreter a dolsot-worker at `worker_path` embeds (whose environment,
// a venv's site-packages, its cells see): an executable python3/python beside
// it (a venv's bin/), else `built_with` (the interpreter the project was built
// with); "" when neither exists.
std::string WorkerInterpreter(const std::string& worker_path, const std::string& built_with);

// Where a worker runs and what environment it starts from (a server
// running workers on behalf of several callers gives each its own).
struct WorkerPlacement {
  // The worker's working directory; empty: the host's.
  std::string directory;
  // The environment the worker starts from ("NAME=value" entries) instead
  // of the host's; the worker's own variables are still set.
  std::optional<std::vector<std::string>> base_environment;
};

class WorkerProcess {
 public:
  // Spawns `command` (its own process group, stdin /dev/null, the channel as
  // fd 3 named by DOLSOT_WORKER_FD, `extra_env` added, in `placement`'s
  // directory and environment when given) and completes the
  // handshake. A toolbox that fails to import is kInvalidToolbox. Until the
  // handshake the worker's stderr goes to a memory file the host reads
  // (never a pipe, so it cannot fill up and stall the worker): a worker
  // that dies before it answers is reported with its exit status and the
  // last lines it wrote. Once it answers, what it wrote is copied to the
  // host's stderr and the worker writes there directly (fd 4, named by
  // DOLSOT_WORKER_STDERR_FD, until the worker takes it over).
  static StatusOr<std::unique_ptr<WorkerProcess>> Start(
      const std::vector<std::string>& command, const std::vector<std::string>& extra_env,
      const WorkerSettings& settings, protocol::Deadline deadline,
      const WorkerPlacement& placement = {});
  ~WorkerProcess();  // Stop()

  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // A fresh session process (it waits for kLoad). Thread-safe.
  StatusOr<ProcessChannel> OpenSession(protocol::Deadline deadline);
  // How session process `pid` ended (a wait status), when this worker reaped
  // it: it was the worker's child, or its parent died first (the worker is
  // their subreaper). Waits up to ~2 s for a process that is dying. Thread-safe.
  std::optional<int> ExitStatus(pid_t pid);
  // Asks the worker to kill its sessions and exit; reaps it. Idempotent.
  void Stop();
  pid_t pid() const { return process_.pid(); }
  // The layers of a sandboxed worker (empty without a sandbox).
  const SandboxReport& sandbox_report() const { return sandbox_report_; }

 private:
  WorkerProcess(UniqueFd socket, ChildProcess process)
      : socket_(std::move(socket)), process_(std::move(process)) {}
  // The handshake failed with `why`: why the worker did not answer, with
  // its exit status and the tail of its start-up stderr.
  Status StartFailure(const std::string& name, const Status& why,
                      const UniqueFd& startup_stderr);

  std::mutex mutex_;
  UniqueFd socket_;
  ChildProcess process_;
  bool stopped_ = false;
  // A sandboxed worker is pid 1 of its own PID namespace (a child of the
  // process the host started); the pids it names are translated.
  bool sandboxed_ = false;
  SandboxReport sandbox_report_;
};

}  // namespace dolsot
