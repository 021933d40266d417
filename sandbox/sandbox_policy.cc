// SandboxPolicy validation, mount specs and the SandboxReport's text forms.
#include "sandbox/sandbox_policy.h"

#include "sandbox/mount_plan.h"

#include <set>

namespace dolsot {
namespace {

// A path the sandbox can mount at or from: absolute, no NUL, no ".."
// component. `what` names it in the error.
Status CheckPath(const std::string& path, const std::string& what) {
  if (path.empty() || path[0] != '/') {
    return InvalidArgument(what + " must be an absolute path, got '" + path + "'");
  }
  if (path.find('\0') != std::string::npos) return InvalidArgument(what + " holds a NUL byte");
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (path.compare(start, end - start, "..") == 0 && end - start == 2) {
      return InvalidArgument(what + " must not contain '..', got '" + path + "'");
    }
    start = end + 1;
  }
  return Status::Ok();
}

bool Under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         path[dir.size()] == '/');
}

std::string Trimmed(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// A cell can change what is inside a read-write mount, on the host, for
// every later worker start: no other mount may be taken from there (its
// source could be swapped for a symlink to the host's root), nor placed
// there (its mount point could be). One inside another by another name (a
// host symlink, a bind mount) is refused when the worker starts
// (bind_source.h); here the spelled paths are checked, so the mistake is
// named where the Sandbox is made.
Status CheckReadWriteMounts(const std::vector<SandboxMount>& mounts) {
  for (const SandboxMount& writable : mounts) {
    if (writable.mode != MountMode::kReadWrite) continue;
    const std::string host = NormalizePath(writable.host_path);
    const std::string virt = NormalizePath(writable.virtual_path);
    for (const SandboxMount& m : mounts) {
      if (&m == &writable) continue;
      const std::string other_host = NormalizePath(m.host_path);
      const std::string other_virt = NormalizePath(m.virtual_path);
      if (other_host != host && PathUnder(other_host, host)) {
        return InvalidArgument(
            "mount " + other_virt + ": its host path '" + other_host + "' lies inside the "
            "read-write mount " + virt + " ('" + host + "'); a cell could replace part of it "
            "with a symlink and so change what a later sandbox binds there. Mount one or the "
            "other, or make " + virt + " read-only or an overlay");
      }
      if (PathUnder(other_virt, virt)) {
        return InvalidArgument(
            "mount " + other_virt + " lies inside the read-write mount " + virt + "; a cell "
            "could replace its mount point with a symlink. Place it elsewhere, or make " + virt +
            " read-only or an overlay");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

const char* MountModeName(MountMode mode) {
  switch (mode) {
    case MountMode::kReadOnly: return "read-only";
    case MountMode::kReadWrite: return "read-write";
    case MountMode::kOverlay: return "overlay";
  }
  return "read-only";
}

StatusOr<MountMode> ParseMountMode(std::string_view text) {
  if (text == "read-only" || text == "ro") return MountMode::kReadOnly;
  if (text == "read-write" || text == "rw") return MountMode::kReadWrite;
  if (text == "overlay") return MountMode::kOverlay;
  return InvalidArgument("a mount's mode must be 'read-only', 'read-write' or 'overlay', got '" +
                         std::string(text) + "'");
}

StatusOr<SandboxMount> ParseMountSpec(std::string_view spec) {
  auto eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size()) {
    return InvalidArgument("a mount is VIRT=HOST[:MODE], got '" + std::string(spec) + "'");
  }
  SandboxMount mount;
  mount.virtual_path = std::string(spec.substr(0, eq));
  std::string_view rest = spec.substr(eq + 1);
  auto colon = rest.rfind(':');
  if (colon != std::string_view::npos) {
    auto mode = ParseMountMode(rest.substr(colon + 1));
    if (!mode.ok()) return mode.status();
    mount.mode = *mode;
    rest = rest.substr(0, colon);
  }
  mount.host_path = std::string(rest);
  return mount;
}

Status ValidateSandboxPolicy(const SandboxPolicy& policy) {
  std::set<std::string> seen;
  for (const SandboxMount& m : policy.mounts) {
    DOLSOT_RETURN_IF_ERROR(CheckPath(m.virtual_path, "a mount's virtual path"));
    DOLSOT_RETURN_IF_ERROR(CheckPath(m.host_path, "a mount's host path"));
    std::string virt = Trimmed(m.virtual_path);
    if (virt == "/") return InvalidArgument("a mount cannot replace the sandbox's root '/'");
    for (const char* system : {"/proc", "/dev"}) {
      if (Under(virt, system)) {
        return InvalidArgument("a mount cannot be placed under " + std::string(system) +
                               ", got '" + m.virtual_path + "'");
      }
    }
    if (Trimmed(m.host_path) == "/") {
      return InvalidArgument("mounting the host's whole filesystem ('/') is not a sandbox");
    }
    if (!seen.insert(virt).second) {
      return InvalidArgument("two mounts at one virtual path '" + virt + "'");
    }
    // overlayfs reads its directories from one option string: ',' ends an
    // option and ':' separates lower layers, so such a host path would be
    // misread (it could even name another directory as the writable layer).
    if (m.mode == MountMode::kOverlay &&
        m.host_path.find_first_of(",:\\") != std::string::npos) {
      return InvalidArgument("overlay mount " + virt + ": the host path must not contain ',', "
                             "':' or '\\' (overlayfs option syntax), got '" + m.host_path + "'");
    }
  }
  DOLSOT_RETURN_IF_ERROR(CheckReadWriteMounts(policy.mounts));
  for (const auto& [name, value] : policy.env) {
    if (name.empty() || name.find('=') != std::string::npos || name.find('\0') != std::string::npos) {
      return InvalidArgument("env: a variable's name must be non-empty without '=', got '" + name +
                             "'");
    }
    if (value.find('\0') != std::string::npos) {
      return InvalidArgument("env: the value of " + name + " holds a NUL byte");
    }
  }
  constexpr std::uint64_t kMaxMb = std::uint64_t{1} << 30;  // a petabyte
  struct Cap {
    const char* name;
    std::uint64_t value, max;
  };
  for (const Cap& c : {Cap{"memory_mb", policy.memory_mb, kMaxMb},
                       Cap{"processes", policy.processes, 1u << 22},
                       Cap{"open_files", policy.open_files, 1u << 20},
                       Cap{"file_size_mb", policy.file_size_mb, kMaxMb},
                       Cap{"disk_mb", policy.disk_mb, kMaxMb},
                       Cap{"cpu_seconds", policy.cpu_seconds, kMaxMb}}) {
    if (c.value > c.max) {
      return InvalidArgument(std::string(c.name) + " is out of range: " + std::to_string(c.value));
    }
  }
  if (policy.memory_mb != 0 && policy.memory_mb < 64) {
    return InvalidArgument("memory_mb must be 0 (no cap) or at least 64: CPython needs that much "
                           "address space to start; got " + std::to_string(policy.memory_mb));
  }
  if (policy.processes != 0 && policy.processes < 8) {
    return InvalidArgument("processes must be 0 (no cap) or at least 8 (the worker, a runner, "
                           "its snapshot and checkpoint writers); got " +
                           std::to_string(policy.processes));
  }
  if (policy.open_files != 0 && policy.open_files < 64) {
    return InvalidArgument("open_files must be 0 (no cap) or at least 64; got " +
                           std::to_string(policy.open_files));
  }
  return Status::Ok();
}

bool SandboxKeepsVariable(const std::string& name) {
  return name == "PATH" || name == "LANG" || name == "TZ" || name == "TERM" ||
         name.rfind("LC_", 0) == 0;
}

}  // namespace dolsot
