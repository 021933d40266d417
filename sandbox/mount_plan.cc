// PlanMounts: the sandbox's filesystem as a list of mount operations.
#include "sandbox/mount_plan.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>

namespace dolsot {
namespace {

std::size_t Depth(const std::string& path) {
  return path == "/" ? 0 : static_cast<std::size_t>(std::count(path.begin(), path.end(), '/'));
}

// A hidden path lies strictly inside `outer` and holds (or is) `inner`:
// `inner` must then be bound again on top of the hiding tmpfs.
bool HiddenBetween(const std::string& outer, const std::string& inner,
                   const std::vector<std::string>& hidden) {
  for (const std::string& h : hidden) {
    if (h != outer && PathUnder(h, outer) && PathUnder(inner, h)) return true;
  }
  return false;
}

}  // namespace

std::string NormalizePath(const std::string& path) {
  if (path.empty() || path[0] != '/') return "";
  std::vector<std::string> parts;
  std::size_t start = 1;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (part == "..") return "";
    if (!part.empty() && part != ".") parts.push_back(std::move(part));
    start = end + 1;
  }
  std::string out;
  for (const std::string& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

bool PathUnder(const std::string& path, const std::string& dir) {
  if (dir == "/") return !path.empty() && path[0] == '/';
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         path[dir.size()] == '/');
}

PathKind StatPathKind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return PathKind::kMissing;
  if (S_ISDIR(st.st_mode)) return PathKind::kDirectory;
  return PathKind::kFile;
}

StatusOr<std::vector<MountOp>> PlanMounts(
    const MountPlanInputs& inputs, const std::function<PathKind(const std::string&)>& kind_of) {
  std::vector<std::string> hidden;
  for (const std::string& h : inputs.hidden) {
    std::string n = NormalizePath(h);
    if (!n.empty() && n != "/") hidden.push_back(n);
  }
  // System paths: normalized, existing, de-duplicated.
  std::vector<std::string> system;
  std::set<std::string> seen;
  for (const std::string& raw : inputs.system_paths) {
    std::string p = NormalizePath(raw);
    if (p.empty()) continue;  // relative entries ('' = the cwd) are never bound
    if (p == "/") {
      return InvalidArgument(
          "the worker's Python path holds '/', which would make the whole filesystem visible "
          "inside the sandbox; remove it from sys.path (or python_path)");
    }
    if (kind_of(p) == PathKind::kMissing || !seen.insert(p).second) continue;
    // A path that is itself hidden (the host's cwd as a sys.path entry) is
    // never bound; what the worker needs from it is listed one by one.
    if (std::find(hidden.begin(), hidden.end(), p) != hidden.end()) continue;
    system.push_back(p);
  }
  std::vector<MountOp> ops;
  for (const std::string& p : system) {
    bool nested = false;
    for (const std::string& other : system) {
      if (other != p && PathUnder(p, other) && !HiddenBetween(other, p, hidden)) nested = true;
    }
    if (nested) continue;
    ops.push_back({MountOpKind::kBindReadOnly, p, p, kind_of(p) == PathKind::kFile});
  }
  for (const SandboxMount& m : inputs.mounts) {
    std::string source = NormalizePath(m.host_path);
    std::string target = NormalizePath(m.virtual_path);
    if (source.empty() || target.empty()) {
      return InvalidArgument("a mount's paths must be absolute without '..': '" +
                             m.virtual_path + "' = '" + m.host_path + "'");
    }
    PathKind kind = kind_of(source);
    if (kind == PathKind::kMissing) {
      return InvalidArgument("mount " + target + ": the host path '" + source +
                             "' does not exist");
    }
    MountOpKind op_kind = MountOpKind::kBindReadOnly;
    if (m.mode == MountMode::kReadWrite) op_kind = MountOpKind::kBindReadWrite;
    if (m.mode == MountMode::kOverlay) {
      if (kind != PathKind::kDirectory) {
        return InvalidArgument("overlay mount " + target + ": the host path '" + source +
                               "' is a file; overlayfs layers a directory (use 'read-only', or "
                               "overlay its directory)");
      }
      op_kind = MountOpKind::kOverlay;
    }
    ops.push_back({op_kind, source, target, kind == PathKind::kFile, /*from_policy=*/true});
  }
  // A sealed path's inside is never a mount's host path.
  for (const std::string& given : inputs.sealed) {
    const std::string sealed = NormalizePath(given);
    if (sealed.empty() || sealed == "/") continue;
    for (const MountOp& op : ops) {
      if (!op.from_policy) continue;
      if (op.source == sealed || !PathUnder(op.source, sealed)) continue;
      return InvalidArgument("mount " + op.target + " would show part of '" + sealed +
                             "', which must stay outside the sandbox (the session store's "
                             "directory)");
    }
  }
  // Hidden paths, wherever a bind would show them (at the bind's target).
  std::vector<MountOp> hides;
  for (const std::string& h : hidden) {
    for (const MountOp& op : ops) {
      if (!PathUnder(h, op.source)) continue;
      if (h == op.source) {
        return InvalidArgument("mount " + op.target + " would show '" + h +
                               "', which must stay outside the sandbox (the session store's "
                               "cache directory or the host's working directory)");
      }
      if (kind_of(h) != PathKind::kDirectory) continue;
      std::string target = op.target == "/" ? h : op.target + h.substr(op.source.size());
      hides.push_back({MountOpKind::kHide, "", target, false});
    }
  }
  ops.insert(ops.end(), hides.begin(), hides.end());
  // Nothing is mounted inside a read-write mount: a cell could have put a
  // symlink where its mount point would be (the policy's own mounts are
  // checked by ValidateSandboxPolicy; here Python's paths and the hides).
  for (const MountOp& writable : ops) {
    if (writable.kind != MountOpKind::kBindReadWrite) continue;
    for (const MountOp& op : ops) {
      if (op.target == writable.target || !PathUnder(op.target, writable.target)) continue;
      return InvalidArgument(
          "the read-write mount " + writable.target + " would hold " + op.target +
          (op.kind == MountOpKind::kHide ? " (which must stay hidden: the session store's cache "
                                           "directory or the host's working directory)"
                                         : " (" + op.source + ", which the sandbox binds)") +
          "; a cell could replace what is there. Mount " + writable.target +
          " elsewhere, or make it read-only or an overlay");
    }
  }
  // Parents first; at equal depth, binds before hides, then by path.
  std::stable_sort(ops.begin(), ops.end(), [](const MountOp& a, const MountOp& b) {
    if (Depth(a.target) != Depth(b.target)) return Depth(a.target) < Depth(b.target);
    return a.target < b.target;
  });
  return ops;
}

}  // namespace dolsot
