// The worker's side of a Sandbox: what of its Python must stay visible (the
// mount plan's inputs, from the interpreter itself), entering the namespaces
// and the new root before the toolboxes import, and locking the sandbox
// (rlimits, capabilities, seccomp, the environment; the walls between its
// sessions, which each keeper puts up) before the worker answers the host.
// Needs the GIL.
#pragma once

#include "backend_subprocess/worker_settings.h"
#include "core/status.h"
#include "sandbox/sandbox_policy.h"
#include "sandbox/session_walls.h"

namespace dolsot {

// Enters the sandbox of `settings.sandbox` (which must be set). On success
// the calling process is pid 1 of the sandbox's PID namespace, inside its new
// root, with sys.path and settings.cwd pointing at the scratch directory; its
// parent (the process the host started) waits for it outside and never
// returns from here.
StatusOr<SandboxReport> EnterWorkerSandbox(WorkerSettings& settings);

// Once the toolboxes are imported: scrubs os.environ to the allow-list and
// the policy's env, then rlimits, capabilities and seccomp of the worker,
// and the walls each session's keeper puts up (probed here).
Status LockWorkerSandbox(const WorkerSettings& settings, SandboxReport* report);

// The walls a keeper puts up before its session's first process
// (session_keeper.h), once LockWorkerSandbox succeeded; nullptr without a
// sandbox.
const SessionWalls* WorkerSessionWalls();

}  // namespace dolsot
