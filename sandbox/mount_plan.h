// MountPlan: which host paths a sandboxed worker sees, where, and how: a pure
// computation from what Python needs, the policy's mounts and what must stay
// hidden, so it is unit-tested without namespaces (sandbox_setup.cc applies it).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "sandbox/sandbox_policy.h"

namespace dolsot {

enum class PathKind { kMissing, kDirectory, kFile };

enum class MountOpKind {
  kBindReadOnly,   // host `source` at `target`, read-only, nosuid, nodev
  kBindReadWrite,  // host `source` at `target`, writable, nosuid, nodev
  kHide,           // an empty read-only tmpfs over `target` (inside a bind)
  kOverlay,        // overlayfs at `target`: host `source` (a directory) the
                   // read-only lower layer, writes in the sandbox's own tmpfs
};

struct MountOp {
  MountOpKind kind = MountOpKind::kBindReadOnly;
  std::string source;  // a host path (empty for kHide)
  std::string target;  // the path inside the sandbox
  bool is_file = false;
  // A policy mount's host path is opened without following any symlink (a
  // link on it could be one a cell of another Sandbox planted); Python's
  // own paths follow the host's links (sandbox/bind_source.h).
  bool from_policy = false;

  bool operator==(const MountOp&) const = default;
};

struct MountPlanInputs {
  // What Python needs, read-only at the same path: the interpreter's
  // prefixes, its stdlib, the worker's sys.path entries, toolbox modules.
  std::vector<std::string> system_paths;
  std::vector<SandboxMount> mounts;  // the policy's
  // Host paths that must not be visible even when inside a bound path (the
  // store's cache directory, the host's cwd). A system path equal to one of
  // these, or holding one, is bound with that part hidden.
  std::vector<std::string> hidden;
  // Of those, the ones nothing may be mounted from inside either (the
  // store's directories: any part of them is other sessions' state). The
  // host's cwd is not sealed: a directory under it is an ordinary mount.
  std::vector<std::string> sealed;
};

// "/a//b/./c/" -> "/a/b/c"; "" when `path` is not absolute or has "..".
std::string NormalizePath(const std::string& path);
// True when `path` is `dir` or lies under it (both normalized).
bool PathUnder(const std::string& path, const std::string& dir);

// The operations in an order that can be applied one by one (a parent
// before what is mounted inside it). System paths that are missing are
// skipped; a system path "/" is an error (it would show everything); a
// system path inside another one is dropped unless a hidden path lies
// between them. The policy's mounts must exist (kInvalidArgument naming the
// missing host path); an overlay's host path must be a directory. `kind_of` tells what a host path is (stat, or a fake).
StatusOr<std::vector<MountOp>> PlanMounts(const MountPlanInputs& inputs,
                                          const std::function<PathKind(const std::string&)>& kind_of);

// PathKind of a host path by stat(2), following symlinks.
PathKind StatPathKind(const std::string& path);

}  // namespace dolsot
