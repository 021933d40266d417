// SandboxSetup: applies a SandboxPolicy to the worker, once, before it
// serves any session (never on a cell's path). Two steps:
//   EnterSandbox: user, mount, PID, IPC, UTS (and network) namespaces, then a
//     new root built from a MountPlan and pivot_root; the old root detached.
//     It forks once: the caller stays outside the new PID namespace, waits
//     for the child (pid 1 inside) and exits with its status; only the child
//     returns. Call it single-threaded.
//   LockSandbox: rlimits, no_new_privs, the worker's seccomp filter, its
//     capabilities but CAP_SYS_ADMIN dropped; and the walls every session's
//     keeper puts up (session_walls.h: its own mounts, Landlock, every
//     capability dropped, the full seccomp filter). Call it once the worker
//     has imported its toolboxes.
// Each layer that cannot be applied is an error naming it and how to get it,
// unless the policy is best_effort (the report then says it is off, and why).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "sandbox/mount_plan.h"
#include "sandbox/sandbox_cgroup.h"
#include "sandbox/sandbox_policy.h"
#include "sandbox/session_walls.h"

namespace dolsot {

struct SandboxSetup {
  SandboxPolicy policy;
  std::vector<MountOp> plan;
  // Host paths that must stay outside (the store's directory, the host's
  // cwd): a read-write mount holding one is refused (a cell could move it
  // out from under the mount that hides it).
  std::vector<std::string> hidden;
  // fork() made safe for the caller's runtime (CPython's before/after hooks);
  // must not change the child's process group.
  std::function<pid_t()> fork_process;
};

// The host paths every sandbox shows read-only besides the worker's Python
// path: /usr, the loader's directories that are not merged-usr symlinks.
std::vector<std::string> BaseSystemPaths();

// Returns the report so far in the child (pid 1 of the new PID namespace),
// an error in the caller when a required layer failed before the fork; the
// caller's process never returns once the fork happened.
StatusOr<SandboxReport> EnterSandbox(const SandboxSetup& setup);

// Adds the locking layers to `report`: rlimits on the worker, and
// `walls`, what each session's keeper puts up (session_walls.h: Landlock,
// capabilities, seccomp, its own mounts), probed once here. The worker
// itself keeps the capabilities its keepers need over its own namespaces (with a user
// namespace) and a seccomp filter that lets its keepers mount.
Status LockSandbox(const SandboxSetup& setup, SandboxReport* report, SessionWalls* walls);

// The cgroup of a root host's worker: sandbox_cgroup.h (included).

}  // namespace dolsot
