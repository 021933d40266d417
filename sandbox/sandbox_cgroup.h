// The Sandbox's cgroup layer: the kernel exempts root from RLIMIT_NPROC, so a
// root host's worker caps its processes with a pids cgroup (v1) it is moved
// into by the host (PlaceInSandboxCgroup) or joins itself
// (CapProcessesWithCgroup); the host removes it once the worker is reaped.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/status.h"
#include "sandbox/sandbox_policy.h"

namespace dolsot {

// A root host's worker caps its processes with a pids cgroup (the kernel
// exempts root from RLIMIT_NPROC): its directory for the worker the host
// started as `worker` ("" without a pids controller), and its removal once
// that worker is reaped (a no-op when absent or not root).
std::string SandboxCgroupDir(pid_t worker);
void RemoveSandboxCgroup(pid_t worker);

// The host's half, called right after spawning `worker` and before sending
// it anything: makes that cgroup, caps it at `processes` + 1 and moves the
// worker in. A cgroup v1 move waits for an RCU grace period (5-25 ms here),
// which this way passes while the worker's interpreter starts instead of on
// its start's path. Then removes the empty dolsot-sandbox-<pid> siblings
// that killed hosts left (a cgroup with a process in it cannot be removed).
// A no-op (Ok) when `processes` is 0 or the host is not root; on an error
// the worker joins by itself and reports what failed.
Status PlaceInSandboxCgroup(pid_t worker, std::uint64_t processes);

// The worker's half (before its namespaces): checks that the host placed
// it with the policy's cap, or joins by itself; the `cgroup` layer of
// `report` (missing unless best_effort when there is no pids controller).
Status CapProcessesWithCgroup(const SandboxPolicy& policy, SandboxReport* report);

}  // namespace dolsot
