// The refusals of a Sandbox's mounts that are known before a worker starts:
// a mount that would show what must stay hidden (the session store's
// directory, the host's working directory), a read-write mount holding one
// of those or a path the sandbox binds, an overlay of a file, a mount whose
// host path passes through a symlink or is reached through a read-write
// mount. The worker refuses all of them again when it builds its root
// (mount_plan.h, sandbox_root.cc), with the same functions; a host (the CLI)
// asks here first, so they are a configuration error where the Repl is
// opened (kConfig, the CLI's exit 2), not a failed cell.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "sandbox/bind_source.h"
#include "sandbox/mount_plan.h"
#include "sandbox/sandbox_policy.h"

namespace dolsot {

// A host path that must stay outside the sandbox, and what it is, for
// messages ("the working directory dolsot runs in").
struct HiddenHostPath {
  std::string path;
  std::string what;
  bool sealed = false;  // nothing inside it may be mounted either (MountPlanInputs::sealed)
};

// What a Repl's Sandbox keeps hidden, each with what it is: dolsot's cache
// directory, the worker's working directory `cwd` (when known) and the
// session store's own directory `store_dir` (when it has one elsewhere).
std::vector<HiddenHostPath> ReplHiddenPaths(const std::string& cache_dir, const std::string& cwd,
                                            const std::string& store_dir);

// The read-write mounts of `plan`, opened below `root` (an O_PATH
// descriptor of the host's root) without following any symlink, then again
// with all of them known, so one inside another (by any name) is refused;
// then every `hidden` path reached through one of them is refused (a cell
// could move it out from under what hides it). On success `out` holds the
// trees no other bind source may be looked up in.
Status FindWritableTrees(int root, const std::vector<MountOp>& plan,
                         const std::vector<std::string>& hidden, WritableTrees* out);

// Every refusal of `mounts` above, for a worker whose store and working
// directory are `hidden`: kConfig naming the mount, the path and why, or Ok.
// A path the host cannot search (kIo) is left to the worker, which reports
// it when it starts. The worker's own Python paths are not known here; a
// read-write mount over them is refused when the worker starts.
Status CheckSandboxMounts(const std::vector<SandboxMount>& mounts,
                          const std::vector<HiddenHostPath>& hidden);

}  // namespace dolsot
