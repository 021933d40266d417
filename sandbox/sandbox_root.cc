// The Sandbox's new root (see sandbox_root.h).
#include "sandbox/sandbox_root.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/unique_fd.h"
#include "sandbox/bind_source.h"
#include "sandbox/proc_masks.h"
#include "sandbox/sandbox_layers.h"
#include "sandbox/sandbox_mount_check.h"
#include "sandbox/session_walls.h"

namespace dolsot {
namespace {

using sandbox_layers::Active;
using sandbox_layers::Errno;
using sandbox_layers::Missing;

// Where the old root and the new one sit while the new root is built.
constexpr char kBase[] = "/tmp";
constexpr char kOldRoot[] = "/oldroot";
constexpr char kNewRoot[] = "/newroot";

// mkdir -p, each new directory 0755.
Status MakeDirs(const std::string& path) {
  std::size_t at = 1;
  while (at <= path.size()) {
    std::size_t end = path.find('/', at);
    if (end == std::string::npos) end = path.size();
    std::string prefix = path.substr(0, end);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status(ErrorCode::kUnavailable, Errno("mkdir " + prefix));
    }
    at = end + 1;
  }
  return Status::Ok();
}

Status MakeFile(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash > 0) DOLSOT_RETURN_IF_ERROR(MakeDirs(path.substr(0, slash)));
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  if (!fd && errno != EEXIST) return Status(ErrorCode::kUnavailable, Errno("create " + path));
  return Status::Ok();
}

// mount_setattr(2) (5.12+); its constants for older headers.
struct MountAttr {
  std::uint64_t attr_set, attr_clr, propagation, userns_fd;
};
constexpr std::uint64_t kAttrReadOnly = 0x1, kAttrNoSuid = 0x2, kAttrNoDev = 0x4;
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif

// Sets read-only (when asked), nosuid and nodev on the mount at `path` and,
// with `recursive`, every mount under it.
Status Restrict(const std::string& path, bool read_only, bool recursive) {
  MountAttr attr{};
  attr.attr_set = kAttrNoSuid | kAttrNoDev | (read_only ? kAttrReadOnly : 0);
  unsigned flags = recursive ? 0x8000 /* AT_RECURSIVE */ : 0;
  if (::syscall(SYS_mount_setattr, AT_FDCWD, path.c_str(), flags, &attr, sizeof attr) == 0) {
    return Status::Ok();
  }
  if (errno != ENOSYS) return Status(ErrorCode::kUnavailable, Errno("mount_setattr " + path));
  // Before 5.12: a remount keeping the flags the mount has (locked ones
  // must be kept); not recursive.
  struct statvfs vfs {};
  unsigned long keep = 0;
  if (::statvfs(path.c_str(), &vfs) == 0) {
    if (vfs.f_flag & ST_NOEXEC) keep |= MS_NOEXEC;
    if (vfs.f_flag & ST_NOATIME) keep |= MS_NOATIME;
    if (vfs.f_flag & ST_NODIRATIME) keep |= MS_NODIRATIME;
    if (vfs.f_flag & ST_RDONLY) keep |= MS_RDONLY;
  }
  unsigned long flags2 = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | keep |
                         (read_only ? MS_RDONLY : 0);
  if (::mount(nullptr, path.c_str(), nullptr, flags2, nullptr) != 0) {
    return Status(ErrorCode::kUnavailable, Errno("remount " + path));
  }
  return Status::Ok();
}

Status Tmpfs(const std::string& path, const std::string& options, unsigned long flags = 0) {
  if (::mount("tmpfs", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | flags, options.c_str()) != 0) {
    return Status(ErrorCode::kUnavailable, Errno("mount tmpfs on " + path));
  }
  return Status::Ok();
}

// The host's side while the new root is built: its root (the old one) and
// the trees a session can write, so that every bind source is opened
// without following what a cell could have planted (bind_source.h).
struct HostSide {
  UniqueFd root;          // O_PATH of kOldRoot
  WritableTrees writable;  // the read-write mounts' sources
};

// Binds the host path `source` (opened by OpenBindSource, its kind checked)
// at `target` under the new root, from that descriptor. `follow_symlinks`:
// the host's own links on the way may be followed (Python's paths), else
// none may be (a policy mount's).
Status Bind(const HostSide& host, const std::string& source, const std::string& target,
            bool is_file, bool read_only, bool follow_symlinks = true) {
  auto opened = OpenBindSource(host.root.get(), source, host.writable, follow_symlinks);
  if (!opened.ok()) return opened.status();
  struct stat st {};
  if (::fstat(opened->get(), &st) != 0) return Status(ErrorCode::kUnavailable, Errno("fstat " + source));
  if (S_ISDIR(st.st_mode) == is_file) {
    return Status(ErrorCode::kUnavailable,
                  source + " changed while the sandbox started (it is " +
                      (is_file ? "now a directory, was a file" : "no longer a directory") + ")");
  }
  DOLSOT_RETURN_IF_ERROR(is_file ? MakeFile(target) : MakeDirs(target));
  const std::string from = DescriptorPath(std::string(kNewRoot) + "/proc", opened->get());
  if (::mount(from.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return Status(ErrorCode::kUnavailable, Errno("bind " + source));
  }
  return Restrict(target, read_only, /*recursive=*/true);
}

// The read-write mounts' sources as trees no other bind may be looked up in
// (sandbox_mount_check.h: the same check the host makes before the worker
// starts).
Status FindWritableTrees(const SandboxSetup& setup, HostSide* host) {
  return dolsot::FindWritableTrees(host->root.get(), setup.plan, setup.hidden, &host->writable);
}

std::string SizeOption(std::uint64_t mb) {
  return mb == 0 ? std::string() : ",size=" + std::to_string(mb) + "m";
}

// /dev: a tmpfs with the four harmless devices, the usual symlinks and a
// size-capped /dev/shm (POSIX semaphores, multiprocessing).
Status BuildDev(const HostSide& host, const std::string& dev, std::uint64_t disk_mb) {
  DOLSOT_RETURN_IF_ERROR(MakeDirs(dev));
  DOLSOT_RETURN_IF_ERROR(Tmpfs(dev, "mode=0755,size=64k", MS_NOEXEC));
  for (const char* name : {"null", "zero", "random", "urandom"}) {
    std::string target = dev + "/" + name;
    DOLSOT_RETURN_IF_ERROR(MakeFile(target));
    const std::string source = std::string("/dev/") + name;
    auto opened = OpenBindSource(host.root.get(), source, host.writable);
    struct stat st {};
    if (!opened.ok() || ::fstat(opened->get(), &st) != 0 || !S_ISCHR(st.st_mode)) {
      return Status(ErrorCode::kUnavailable, "the host's " + source + " is not a character device" +
                                                 (opened.ok() ? "" : " (" + opened.status().message() + ")"));
    }
    const std::string from = DescriptorPath(std::string(kNewRoot) + "/proc", opened->get());
    if (::mount(from.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      return Status(ErrorCode::kUnavailable, Errno("bind " + source));
    }
    // nodev would make these unusable; nosuid and noexec are fine.
    MountAttr attr{};
    attr.attr_set = kAttrNoSuid;
    (void)::syscall(SYS_mount_setattr, AT_FDCWD, target.c_str(), 0, &attr, sizeof attr);
  }
  const char* links[][2] = {{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
                            {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}};
  for (auto& link : links) {
    if (::symlink(link[0], (dev + "/" + link[1]).c_str()) != 0) {
      return Status(ErrorCode::kUnavailable, Errno("symlink /dev/" + std::string(link[1])));
    }
  }
  DOLSOT_RETURN_IF_ERROR(MakeDirs(dev + "/shm"));
  DOLSOT_RETURN_IF_ERROR(Tmpfs(dev + "/shm", "mode=01777" + SizeOption(disk_mb), MS_NOEXEC));
  return Restrict(dev, /*read_only=*/true, /*recursive=*/false);
}

// Merged-usr symlinks (/lib -> usr/lib, ...) as the host has them.
Status CopyRootSymlinks(const std::string& root) {
  for (const char* name : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
    std::string host = std::string(kOldRoot) + "/" + name;
    char target[4096];
    ssize_t n = ::readlink(host.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (::symlink(target, (root + "/" + name).c_str()) != 0 && errno != EEXIST) {
      return Status(ErrorCode::kUnavailable, Errno(std::string("symlink /") + name));
    }
  }
  return Status::Ok();
}

// Where the overlays' upper and work directories live while the new root
// is built: a tmpfs of its own, capped at disk_mb, in the temporary root
// that is detached with the old one (so no path inside the sandbox reaches
// it; the overlays keep their own reference to it).
constexpr char kOverlayLayers[] = "/overlays";


// overlayfs at `target` over the host directory `lower` (a path under the
// old root), its writable layer in kOverlayLayers/`index` (MountOverlayfs).
// The host directory is bound read-only first, from its checked descriptor,
// at kSessionLowers/`index` in the new root, where each session's keeper
// finds it to mount the session's own overlay (session_walls.h); that bind,
// not the host path, is the overlay's lower layer.
Status Overlay(const HostSide& host, const std::string& source, const std::string& target,
               std::size_t index) {
  const std::string lower = std::string(kNewRoot) + kSessionLowers + "/" + std::to_string(index);
  DOLSOT_RETURN_IF_ERROR(
      Bind(host, source, lower, /*is_file=*/false, /*read_only=*/true, /*follow_symlinks=*/false));
  const std::string layer = std::string(kOverlayLayers) + "/" + std::to_string(index);
  DOLSOT_RETURN_IF_ERROR(MakeDirs(layer));
  DOLSOT_RETURN_IF_ERROR(MakeDirs(target));
  return MountOverlayfs(lower, target, layer);
}

// The overlays while the new root is built, for the report.
struct OverlayState {
  bool layers_made = false;
  Status layers;          // the tmpfs holding every overlay's writable layer
  std::size_t count = 0;  // overlays mounted so far
  std::string shown, failed, why;
};

// One overlay of the plan at `target` (under the new root). One that cannot
// be mounted is an error, or with best_effort the host directory shown
// read-only instead (its writes still never reach the host).
Status MountOverlay(const SandboxSetup& setup, const HostSide& host, const MountOp& op,
                    const std::string& target, OverlayState* state) {
  if (!state->layers_made) {
    state->layers_made = true;
    state->layers = MakeDirs(kOverlayLayers);
    if (state->layers.ok()) {
      state->layers = Tmpfs(kOverlayLayers, "mode=0700" + SizeOption(setup.policy.disk_mb));
    }
  }
  Status mounted = state->layers.ok() ? Overlay(host, op.source, target, state->count++)
                                      : state->layers;
  if (mounted.ok()) {
    state->shown += (state->shown.empty() ? "" : ", ") + op.target;
    return Status::Ok();
  }
  state->why = op.target + ": " + mounted.message();
  state->failed += (state->failed.empty() ? "" : ", ") + op.target;
  if (!setup.policy.best_effort) {
    SandboxReport unused;
    return Missing(setup.policy, &unused, "overlay", state->why,
                   "load overlayfs (modprobe overlay; Linux 5.11 or later for a user other "
                   "than root) or mount " + op.target + " 'read-only'");
  }
  Status bound = Bind(host, op.source, target, false, /*read_only=*/true, !op.from_policy);
  if (!bound.ok()) {
    return Status(bound.code(), "cannot show " + op.source + " at " + op.target + " (" +
                                    bound.message() + ")");
  }
  return Status::Ok();
}

// True when this kernel lists overlayfs (a module not loaded yet may still
// load on the first mount).
bool KernelListsOverlayfs() {
  std::ifstream in(std::string(kOldRoot) + "/proc/filesystems");
  for (std::string line; std::getline(in, line);) {
    if (line.size() >= 7 && line.compare(line.size() - 7, 7, "overlay") == 0) return true;
  }
  return false;
}

void ReportOverlays(const SandboxSetup& setup, const OverlayState& state, SandboxReport* report) {
  if (!state.failed.empty()) {
    (void)Missing(setup.policy, report, "overlay", state.why,
                  "load overlayfs (modprobe overlay; Linux 5.11 or later for a user other than "
                  "root); " + state.failed + " shown read-only instead");
  }
  if (!state.shown.empty()) {
    Active(report, "overlay",
           state.shown + ": the host directory read-only under a writable layer kept in the "
           "sandbox" +
               (setup.policy.disk_mb
                    ? " (" + std::to_string(setup.policy.disk_mb) + " MB for all overlays, per session)"
                    : std::string()) +
               "; writes never reach the host; each session (with its branches) has its own "
               "writable layer, for as long as it lives");
  }
  if (state.shown.empty() && state.failed.empty()) {
    report->layers.push_back(
        {"overlay", false, std::string("no overlay mount asked (this kernel ") +
                               (KernelListsOverlayfs() ? "lists" : "does not list") +
                               " overlayfs in /proc/filesystems)"});
  }
}

// The new root's contents under kNewRoot, from the old root at kOldRoot.
Status BuildRoot(const SandboxSetup& setup, SandboxReport* report) {
  const std::string root = kNewRoot;
  // The sandbox's own places first: a bind the plan puts under /tmp (a
  // toolbox in a temporary directory) then lands inside the scratch.
  DOLSOT_RETURN_IF_ERROR(MakeDirs(root + "/proc"));
  if (::mount("proc", (root + "/proc").c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              nullptr) != 0) {
    return Status(ErrorCode::kUnavailable,
                  Errno("mount proc (a /proc of the new PID namespace)") +
                      " (the kernel refuses a new proc when the host's /proc is partly hidden, "
                      "as in some containers)");
  }
  HostSide host;
  host.root.Reset(::open(kOldRoot, O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!host.root) return Status(ErrorCode::kUnavailable, Errno("open the host's root"));
  DOLSOT_RETURN_IF_ERROR(FindWritableTrees(setup, &host));
  DOLSOT_RETURN_IF_ERROR(BuildDev(host, root + "/dev", setup.policy.disk_mb));
  DOLSOT_RETURN_IF_ERROR(MaskProc(root + "/proc", root + "/dev/null"));
  std::string scratch = root + kSandboxScratch;
  DOLSOT_RETURN_IF_ERROR(MakeDirs(scratch));
  DOLSOT_RETURN_IF_ERROR(Tmpfs(scratch, "mode=0755" + SizeOption(setup.policy.disk_mb)));
  std::vector<std::string> hides;
  OverlayState overlays;
  for (const MountOp& op : setup.plan) {
    std::string target = root + op.target;
    if (op.kind == MountOpKind::kOverlay) {
      DOLSOT_RETURN_IF_ERROR(MountOverlay(setup, host, op, target, &overlays));
      continue;
    }
    if (op.kind == MountOpKind::kHide) {
      DOLSOT_RETURN_IF_ERROR(MakeDirs(target));
      DOLSOT_RETURN_IF_ERROR(Tmpfs(target, "mode=0755,size=16k", MS_NOEXEC));
      hides.push_back(target);
      continue;
    }
    Status bound = Bind(host, op.source, target, op.is_file,
                        op.kind == MountOpKind::kBindReadOnly, !op.from_policy);
    if (!bound.ok()) {
      return Status(bound.code(), "cannot show " + op.source + " at " + op.target + " (" +
                                      bound.message() + ")");
    }
  }
  for (const std::string& h : hides) DOLSOT_RETURN_IF_ERROR(Restrict(h, true, false));
  ReportOverlays(setup, overlays, report);
  DOLSOT_RETURN_IF_ERROR(CopyRootSymlinks(root));
  // The loader's cache, so libraries load as outside.
  if (::access((std::string(kOldRoot) + "/etc/ld.so.cache").c_str(), R_OK) == 0) {
    DOLSOT_RETURN_IF_ERROR(Bind(host, "/etc/ld.so.cache", root + "/etc/ld.so.cache", true, true));
  }
  return Status::Ok();
}

}  // namespace

// The filesystem: a private mount namespace, a new root, the old one gone.
Status SwitchRoot(const SandboxSetup& setup, SandboxReport* report) {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return Status(ErrorCode::kUnavailable, Errno("make / private"));
  }
  // A scratch tmpfs on /tmp becomes the root for a moment, so that the old
  // root (with its /tmp) is at /oldroot and the new one is built at /newroot.
  DOLSOT_RETURN_IF_ERROR(Tmpfs(kBase, "mode=0755,size=64k"));
  // (Built from the parts: the binaries must not carry a "/tmp/" path,
  // test_install.py's sign of a build machine's path.)
  const std::string old_root = std::string(kBase) + kOldRoot;
  const std::string new_root = std::string(kBase) + kNewRoot;
  for (const std::string& dir : {old_root, new_root}) {
    if (::mkdir(dir.c_str(), 0755) != 0) return Status(ErrorCode::kUnavailable, Errno("mkdir"));
  }
  DOLSOT_RETURN_IF_ERROR(Tmpfs(new_root, "mode=0755,size=1m"));
  if (::syscall(SYS_pivot_root, kBase, old_root.c_str()) != 0 || ::chdir("/") != 0) {
    return Status(ErrorCode::kUnavailable, Errno("pivot_root"));
  }
  DOLSOT_RETURN_IF_ERROR(BuildRoot(setup, report));
  if (::chdir(kNewRoot) != 0 || ::syscall(SYS_pivot_root, ".", ".") != 0) {
    return Status(ErrorCode::kUnavailable, Errno("pivot_root into the new root"));
  }
  // The old root (and the scratch tmpfs holding it) is stacked on the new
  // one: detach it, so no path reaches the host's filesystem.
  if (::umount2(".", MNT_DETACH) != 0 || ::chdir("/") != 0) {
    return Status(ErrorCode::kUnavailable, Errno("detach the old root"));
  }
  DOLSOT_RETURN_IF_ERROR(Restrict("/", /*read_only=*/true, /*recursive=*/false));
  if (::chdir(kSandboxScratch) != 0) return Status(ErrorCode::kUnavailable, Errno("chdir"));
  return Status::Ok();
}

// Closes every inherited descriptor of a directory: a directory opened
// before the pivot still reaches the host's tree through openat(2).
void CloseDirectoryFds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return;
  std::vector<int> close_these;
  int own = ::dirfd(dir);
  while (dirent* entry = ::readdir(dir)) {
    int fd = std::atoi(entry->d_name);
    if (entry->d_name[0] == '.' || fd == own) continue;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) close_these.push_back(fd);
  }
  ::closedir(dir);
  for (int fd : close_these) ::close(fd);
}

}  // namespace dolsot
