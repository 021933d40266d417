// The sandbox's layers, applied in the worker (see sandbox_setup.h).
#include "sandbox/sandbox_setup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <ctime>
#include <string_view>
#include <vector>

#include "core/unique_fd.h"
#include "sandbox/bind_source.h"
#include "sandbox/landlock_ruleset.h"
#include "sandbox/proc_masks.h"
#include "sandbox/seccomp_filter.h"
#include "sandbox/session_walls.h"

namespace dolsot {
namespace {

// Where the old root and the new one sit while the new root is built.
constexpr char kBase[] = "/tmp";
constexpr char kOldRoot[] = "/oldroot";
constexpr char kNewRoot[] = "/newroot";

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// A layer that failed: an error, or with best_effort a line in the report.
Status Missing(const SandboxSetup& setup, SandboxReport* report, const std::string& layer,
               const std::string& why, const std::string& how) {
  if (!setup.policy.best_effort) {
    return Status(ErrorCode::kUnavailable, "sandbox: the " + layer + " layer cannot be applied (" +
                                               why + "); " + how +
                                               ", or pass Sandbox(best_effort=True) to run with "
                                               "fewer layers");
  }
  report->layers.push_back({layer, false, why + "; " + how});
  return Status::Ok();
}

void Active(SandboxReport* report, const std::string& layer, const std::string& detail) {
  report->layers.push_back({layer, true, detail});
}

Status WriteFile(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return Status(ErrorCode::kUnavailable, Errno("open " + path));
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return Status(ErrorCode::kUnavailable, Errno("write " + path));
  }
  return Status::Ok();
}

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

// The read-write mounts' sources as trees no other bind may be looked up in.
// Each is opened without following any symlink (a link on its way could be
// one a cell planted in another read-write mount); then each again with all
// of them known, so one inside another (by any name: a host bind mount, an
// alias) is refused.
Status FindWritableTrees(const SandboxSetup& setup, HostSide* host) {
  host->writable = WritableTrees{};
  WritableTrees found;
  for (int pass = 0; pass < 2; ++pass) {
    for (const MountOp& op : setup.plan) {
      if (op.kind != MountOpKind::kBindReadWrite) continue;
      auto opened = OpenBindSource(host->root.get(), op.source, host->writable,
                                   /*follow_symlinks=*/false);
      if (!opened.ok()) {
        return Status(opened.status().code(), "the read-write mount " + op.target + ": " +
                                                  opened.status().message());
      }
      if (pass == 0) {
        auto id = IdentityOf(opened->get());
        if (!id.ok()) return id.status();
        found.roots.push_back(*id);
        found.names.push_back(op.source);
      }
    }
    host->writable = found;
  }
  // What must stay hidden (the store, the host's cwd) must not lie in one:
  // a cell could move it out from under the mount that hides it.
  for (const std::string& hidden : setup.hidden) {
    auto opened = OpenBindSource(host->root.get(), hidden, host->writable);
    if (opened.ok() || opened.status().code() != ErrorCode::kPermission) continue;
    std::string tree;
    for (std::size_t i = 0; i < found.roots.size(); ++i) {
      if (PathUnder(NormalizePath(hidden), found.names[i])) tree = found.names[i];
    }
    return Status(ErrorCode::kInvalidArgument,
                  "a read-write mount" + (tree.empty() ? std::string() : " of " + tree) +
                      " holds '" + hidden + "', the session store's directory or the host's "
                      "working directory, which must stay outside the sandbox (a cell could "
                      "move it out from under what hides it); mount a directory that does not "
                      "hold it, or make the mount an overlay");
  }
  return Status::Ok();
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

// Where each overlay's host directory is bound read-only, by index, for the
// keepers' own overlays (session_walls.h), which detach these binds.
constexpr char kSessionLowers[] = "/.dolsot-lowers";

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
    return Missing(setup, &unused, "overlay", state->why,
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
    (void)Missing(setup, report, "overlay", state.why,
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

// The caller of EnterSandbox once it forked: waits for pid 1 of the new
// namespace and ends as it did. Holds nothing but stderr.
[[noreturn]] void WaitAndExit(pid_t child) {
  ::syscall(SYS_close_range, 3, ~0U, 0);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) ::_exit(128 + WTERMSIG(status));
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

// The directory of this process's cgroup in the cgroup v1 pids hierarchy,
// "" when there is none.
std::string PidsCgroupOfSelf() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    auto a = line.find(':');
    auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    if (controllers.find(",pids,") == std::string::npos) continue;
    std::string dir = "/sys/fs/cgroup/pids" + line.substr(b + 1);
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    struct stat st {};
    if (::stat((dir + "/pids.max").c_str(), &st) == 0 || ::stat((dir + "/cgroup.procs").c_str(), &st) == 0) {
      return dir;
    }
  }
  return "";
}

// The pids cgroup `dir` (made when absent) capped at `max`, with `pid` in it.
// Another host's sweep (SweepStaleSandboxCgroups) removes every empty
// dolsot-sandbox-* directory, so one made (or found, a killed host's under a
// reused pid) here can vanish before `pid` is in it: the write then fails
// (ENOENT, or ENODEV on a file opened before the rmdir) and the directory is
// gone; it is made again, a bounded number of times. Once `pid` is in it the
// directory is not empty and no sweep can remove it.
Status JoinPidsCgroup(const std::string& dir, std::uint64_t max, pid_t pid) {
  if (dir.empty()) return Status(ErrorCode::kUnavailable, "no cgroup v1 pids controller");
  Status joined;
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status(ErrorCode::kUnavailable, Errno("mkdir " + dir));
    }
    joined = WriteFile(dir + "/pids.max", std::to_string(max));
    if (joined.ok()) joined = WriteFile(dir + "/cgroup.procs", std::to_string(pid));
    if (joined.ok() || ::access(dir.c_str(), F_OK) == 0) return joined;
  }
  return joined;
}

constexpr std::string_view kSandboxCgroupPrefix = "dolsot-sandbox-";

// Removes the dolsot-sandbox-<pid> directories under `base` that hold no
// process: a host killed with SIGKILL never removes its worker's
// (RemoveSandboxCgroup runs once the worker is reaped), and such a directory
// would stay until reboot. The kernel refuses to rmdir a cgroup with a
// process in it (EBUSY): a live worker's directory stays, whoever its host
// (a pid reused by a live worker is that worker's). An empty one a live host
// has just made, before its worker's move, may go: that host makes it again
// (JoinPidsCgroup). Only names of exactly that shape are touched.
void SweepStaleSandboxCgroups(const std::string& base) {
  DIR* dir = ::opendir(base.c_str());
  if (dir == nullptr) return;
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name.size() <= kSandboxCgroupPrefix.size() || name.substr(0, kSandboxCgroupPrefix.size()) != kSandboxCgroupPrefix) {
      continue;
    }
    std::string_view digits = name.substr(kSandboxCgroupPrefix.size());
    if (digits.size() > 10 || digits.find_first_not_of("0123456789") != std::string_view::npos) continue;
    names.emplace_back(name);
  }
  ::closedir(dir);
  for (const std::string& name : names) (void)::rmdir((base + "/" + name).c_str());
}

// The kernel exempts uid 0 from RLIMIT_NPROC, so for a root host the
// processes cap is a pids cgroup (v1 here) the worker joins: the waiting
// parent and everything pid 1 forks. The host has moved the worker in
// already, as a rule (PlaceInSandboxCgroup); the worker checks that it is
// there with the cap, and joins by itself otherwise. The host removes the
// cgroup once the worker is reaped (RemoveSandboxCgroup).
Status CapProcessesWithCgroup(const SandboxSetup& setup, SandboxReport* report) {
  const std::uint64_t max = setup.policy.processes;
  if (max == 0 || ::geteuid() != 0) return Status::Ok();
  const std::string own = "/dolsot-sandbox-" + std::to_string(::getpid());
  std::string current = PidsCgroupOfSelf();
  const bool placed = current.size() > own.size() &&
                      current.compare(current.size() - own.size(), own.size(), own) == 0;
  // Placed by the host: the cap is written again (cheap; only the move
  // waits), so what holds is this policy's whatever the host wrote.
  Status joined = placed ? WriteFile(current + "/pids.max", std::to_string(max + 1))
                         : JoinPidsCgroup(SandboxCgroupDir(::getpid()), max + 1, ::getpid());
  if (!joined.ok()) {
    return Missing(setup, report, "cgroup", "processes=" + std::to_string(max) +
                   " as root needs a pids cgroup (the kernel exempts root from RLIMIT_NPROC): " +
                   joined.message(), "mount the cgroup pids controller, run as a user other "
                   "than root, or pass processes=0");
  }
  Active(report, "cgroup", "pids.max " + std::to_string(max) + " (+1 for the worker's waiting "
                           "parent; a cgroup v1 pids controller, as root)");
  return Status::Ok();
}

Status EnterUserNamespace(const SandboxSetup& setup, SandboxReport* report) {
  uid_t uid = ::getuid();
  gid_t gid = ::getgid();
  if (::unshare(CLONE_NEWUSER) != 0) {
    std::string why = Errno("unshare(CLONE_NEWUSER)");
    if (errno == EINVAL) why += " (the worker is not single-threaded)";
    return Missing(setup, report, "user-namespace", why,
                   "allow user namespaces (sysctl user.max_user_namespaces > 0; on Debian "
                   "kernel.unprivileged_userns_clone=1; on Ubuntu an AppArmor profile allowing "
                   "userns)");
  }
  Status mapped = WriteFile("/proc/self/setgroups", "deny");
  if (mapped.ok()) mapped = WriteFile("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n");
  if (mapped.ok()) mapped = WriteFile("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n");
  if (!mapped.ok()) return mapped;  // a user namespace half set up: never go on
  Active(report, "user-namespace", "uid " + std::to_string(uid) + " mapped to itself; no "
                                   "capability outside the sandbox");
  return Status::Ok();
}

}  // namespace

std::string SandboxCgroupDir(pid_t worker) {
  std::string base = PidsCgroupOfSelf();
  return base.empty() ? "" : base + "/" + std::string(kSandboxCgroupPrefix) + std::to_string(worker);
}

Status PlaceInSandboxCgroup(pid_t worker, std::uint64_t processes) {
  if (processes == 0 || ::geteuid() != 0) return Status::Ok();
  const std::string base = PidsCgroupOfSelf();
  if (base.empty()) return JoinPidsCgroup("", processes + 1, worker);
  Status placed = JoinPidsCgroup(base + "/" + std::string(kSandboxCgroupPrefix) + std::to_string(worker),
                                 processes + 1, worker);
  // After the move: the worker's own directory is not empty by now, and
  // the sweep too overlaps the worker's start.
  SweepStaleSandboxCgroups(base);
  return placed;
}

void RemoveSandboxCgroup(pid_t worker) {
  if (::geteuid() != 0) return;
  std::string dir = SandboxCgroupDir(worker);
  if (dir.empty()) return;
  // Its last processes (pid 1 dies with the waiting parent) may still be
  // exiting: a bounded wait for the cgroup to empty.
  for (int attempt = 0; attempt < 250; ++attempt) {
    if (::rmdir(dir.c_str()) == 0 || errno != EBUSY) return;
    timespec pause{0, 2'000'000};
    ::nanosleep(&pause, nullptr);
  }
}

std::vector<std::string> BaseSystemPaths() {
  std::vector<std::string> out{"/usr"};
  for (const char* dir : {"/lib", "/lib32", "/lib64", "/libx32", "/bin"}) {
    struct stat st {};
    if (::lstat(dir, &st) == 0 && S_ISDIR(st.st_mode)) out.emplace_back(dir);  // not merged-usr
  }
  return out;
}

StatusOr<SandboxReport> EnterSandbox(const SandboxSetup& setup) {
  SandboxReport report;
  DOLSOT_RETURN_IF_ERROR(ValidateSandboxPolicy(setup.policy));
  DOLSOT_RETURN_IF_ERROR(CapProcessesWithCgroup(setup, &report));
  DOLSOT_RETURN_IF_ERROR(EnterUserNamespace(setup, &report));
  bool in_user_ns = report.Active("user-namespace");
  // A cgroup namespace too: /proc/self/cgroup then names the worker's
  // cgroup as its root, not the host's path to it.
  int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
  if (!setup.policy.network) flags |= CLONE_NEWNET;
  if (::unshare(flags) != 0) {
    std::string why = Errno("unshare(mount, PID, IPC, UTS, cgroup" +
                            std::string(setup.policy.network ? "" : ", network") + " namespaces)");
    // Without them there is no wall at all: best_effort cannot skip this.
    return Status(ErrorCode::kUnavailable,
                  "sandbox: the namespaces cannot be created (" + why + ")" +
                      (in_user_ns ? "" : "; run as root or allow user namespaces"));
  }
  // Pins the waiting parent, to see whether it died before the child asked
  // to die with it.
  UniqueFd parent(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
  pid_t child = setup.fork_process ? setup.fork_process() : ::fork();
  if (child < 0) return Status(ErrorCode::kUnavailable, Errno("fork into the PID namespace"));
  if (child > 0) WaitAndExit(child);
  // pid 1 of the new PID namespace: it dies with the process that waits for it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent) {
    pollfd gone{parent.get(), POLLIN, 0};
    if (::poll(&gone, 1, 0) > 0) ::_exit(1);
    parent.Reset();
  }
  Active(&report, "pid-namespace", "the worker is pid 1 of its own PID namespace; its sessions "
                                  "see and signal only its processes");
  Active(&report, "ipc-namespace", "System V IPC and POSIX message queues private");
  Active(&report, "uts-namespace", "hostname 'sandbox'");
  (void)::sethostname("sandbox", 7);
  if (setup.policy.network) {
    report.layers.push_back({"network-namespace", false, "network=True: the host's network"});
  } else {
    Active(&report, "network-namespace", "empty (no interface up, no loopback; abstract unix "
                                        "sockets of the host unreachable)");
  }
  Status root = SwitchRoot(setup, &report);
  if (!root.ok()) {
    if (root.message().rfind("sandbox: ", 0) == 0) return root;  // a layer named already
    return Status(root.code(), "sandbox: the filesystem layer cannot be applied: " + root.message());
  }
  CloseDirectoryFds();
  Active(&report, "filesystem", "a new root: read-only Python, " +
                                   std::to_string(setup.policy.mounts.size()) +
                                   " mount(s), /dev minimal, scratch " + kSandboxScratch +
                                   (setup.policy.disk_mb ? " (" + std::to_string(setup.policy.disk_mb) + " MB)" : ""));
  return report;
}

namespace {

Status ApplyRlimits(const SandboxPolicy& p, std::string* detail) {
  struct Limit {
    int resource;
    std::uint64_t value;
    std::uint64_t unit;
    const char* name;
  };
  const std::uint64_t mb = 1024 * 1024;
  for (const Limit& l : {Limit{RLIMIT_AS, p.memory_mb, mb, "memory MB"},
                         Limit{RLIMIT_NPROC, p.processes, 1, "processes"},
                         Limit{RLIMIT_NOFILE, p.open_files, 1, "open files"},
                         Limit{RLIMIT_FSIZE, p.file_size_mb, mb, "file size MB"},
                         Limit{RLIMIT_CPU, p.cpu_seconds, 1, "cpu seconds"}}) {
    if (l.value == 0) continue;
    rlimit current{};
    ::getrlimit(l.resource, &current);
    rlim_t value = static_cast<rlim_t>(l.value * l.unit);
    if (current.rlim_max != RLIM_INFINITY && current.rlim_max < value) value = current.rlim_max;
    rlimit next{value, value};
    if (::setrlimit(l.resource, &next) != 0) {
      return Status(ErrorCode::kUnavailable, Errno(std::string("setrlimit(") + l.name + ")"));
    }
    *detail += std::string(detail->empty() ? "" : ", ") + l.name + " " + std::to_string(l.value);
  }
  return Status::Ok();
}

// What a keeper needs to put its walls up (it drops them all after): mount
// (CAP_SYS_ADMIN), empty its bounding set (CAP_SETPCAP), and the file
// capabilities overlayfs checks against the mounter's credentials when it
// sets up a writable layer.
constexpr std::uint64_t kKeeperCapabilities =
    (1ULL << CAP_SYS_ADMIN) | (1ULL << CAP_SETPCAP) | (1ULL << CAP_DAC_OVERRIDE) |
    (1ULL << CAP_DAC_READ_SEARCH) | (1ULL << CAP_FOWNER) | (1ULL << CAP_CHOWN);

SessionWalls NoOverlays(SessionWalls walls) {
  walls.overlays.clear();
  return walls;
}

// What the session walls (session_walls.h) hold on this kernel, as a
// layer of the report: on with every wall, else named missing.
Status ReportSessionWalls(const SandboxSetup& setup, const SessionWalls& walls, int abi,
                          SandboxReport* report) {
  std::string lacking;
  if (!walls.private_mounts) {
    lacking = "each session's own /tmp and /dev/shm need the user-namespace layer";
  }
  if (!walls.landlock) {
    lacking += std::string(lacking.empty() ? "" : "; ") +
               "without Landlock, sessions may signal and read each other's processes";
  }
  if (!lacking.empty()) {
    return Missing(setup, report, "session-walls", lacking,
                   "use Linux 6.12 or later with Landlock and user namespaces, or one Repl per "
                   "session");
  }
  // Signal scoping is Landlock's from ABI 6 (Linux 6.12): an older kernel
  // (Debian 12's 6.1) gets every other wall and this one not, like the
  // worker's own ABI-dependent rules, and the report says so; failing the
  // whole Sandbox there would take away walls it had before sessions had
  // their own.
  const std::string signals =
      abi >= 6 ? "no signal, ptrace, /proc/<pid>/mem, environ or fd access to another "
                 "session's processes or the worker"
               : "no ptrace, /proc/<pid>/mem, environ or fd access to another session's "
                 "processes or the worker; signals between sessions are NOT scoped on this "
                 "kernel (Landlock ABI " + std::to_string(abi) +
                     "; ABI 6, Linux 6.12, scopes them)";
  Active(report, "session-walls",
         "each session (with its branches) in a mount namespace and a Landlock domain of its "
         "own, entered by its keeper: its own /tmp and /dev/shm" +
             (setup.policy.disk_mb ? " (" + std::to_string(setup.policy.disk_mb) + " MB each)"
                                   : std::string()) +
             ", its own overlay layers, a /proc listing only its processes, its own System V "
             "IPC; " + signals);
  return Status::Ok();
}

}  // namespace

Status LockSandbox(const SandboxSetup& setup, SandboxReport* report, SessionWalls* walls) {
  *walls = SessionWalls{};
  std::string limits;
  Status limited = ApplyRlimits(setup.policy, &limits);
  if (!limited.ok()) {
    DOLSOT_RETURN_IF_ERROR(Missing(setup, report, "rlimits", limited.message(), "raise the hard limits"));
  } else {
    Active(report, "rlimits", limits.empty() ? "none asked" : limits);
  }
  if (!report->Active("cgroup")) {
    report->layers.push_back({"cgroup", false, "not used: memory is capped per process by "
                                               "RLIMIT_AS, processes by RLIMIT_NPROC"});
  }
  // Landlock, the capabilities and seccomp wall each session in: its keeper
  // applies them (ApplySessionWalls) after its own mounts. The worker runs
  // no cell; it keeps CAP_SYS_ADMIN over its namespaces for those mounts.
  LandlockPaths paths;
  paths.network = setup.policy.network;
  for (const MountOp& op : setup.plan) {
    if (op.kind == MountOpKind::kBindReadOnly) paths.read_only.push_back(op.target);
  }
  for (const char* p : {"/proc", "/etc/ld.so.cache", "/bin", "/lib", "/lib64", "/sbin"}) {
    paths.read_only.emplace_back(p);
  }
  paths.read_write = {kSandboxScratch, "/dev/shm"};
  for (const MountOp& op : setup.plan) {
    // An overlay is writable inside (its writes stay in the sandbox).
    if (op.kind == MountOpKind::kBindReadWrite || op.kind == MountOpKind::kOverlay) {
      paths.read_write.push_back(op.target);
    }
  }
  paths.devices = {"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"};
  // Listing directories is harmless inside the new root (only what it
  // shows); reading a file needs a rule above.
  paths.list_only = {"/"};
  const int abi = LandlockAbi();
  if (abi <= 0) {
    DOLSOT_RETURN_IF_ERROR(Missing(setup, report, "landlock",
                                   "Landlock is not available (a kernel >= 5.13 with "
                                   "CONFIG_SECURITY_LANDLOCK and 'landlock' in the lsm= boot "
                                   "parameter)",
                                   "boot a kernel with Landlock enabled (lsm=...,landlock)"));
  } else {
    walls->landlock = true;
    walls->paths = std::move(paths);
    Active(report, "landlock", LandlockSummary(abi, setup.policy.network) +
                                   "; a domain per session, entered by its keeper");
  }
  walls->private_mounts = report->Active("user-namespace");
  walls->disk_mb = setup.policy.disk_mb;
  if (walls->private_mounts) {
    std::size_t index = 0;
    for (const MountOp& op : setup.plan) {
      if (op.kind != MountOpKind::kOverlay) continue;
      std::string lower = std::string(kSessionLowers) + "/" + std::to_string(index++);
      struct stat st {};
      if (::stat(lower.c_str(), &st) == 0) walls->overlays.push_back({lower, op.target});
    }
  }
  DOLSOT_RETURN_IF_ERROR(ReportSessionWalls(setup, *walls, abi, report));
  // The keepers mount (CAP_SYS_ADMIN), then empty their bounding set
  // (CAP_SETPCAP) and every other set.
  Status dropped = DropCapabilities(
      walls->private_mounts ? kKeeperCapabilities : 0);
  if (!dropped.ok()) {
    DOLSOT_RETURN_IF_ERROR(Missing(setup, report, "capabilities", dropped.message(), "report this"));
  } else {
    Active(report, "capabilities",
           std::string("all dropped in every session process (bounding, ambient, effective, "
                       "permitted)") +
               (walls->private_mounts ? "; the worker keeps CAP_SYS_ADMIN, CAP_SETPCAP and the "
                                        "file capabilities overlayfs needs, over its own "
                                        "namespaces only, for its sessions' keepers"
                                      : ""));
  }
  SeccompOptions options;
  options.deny_inet_sockets = !setup.policy.network;
  options.allow_session_setup = true;
  Status filtered = InstallSeccompFilter(BuildSeccompFilter(options));
  if (!filtered.ok()) {
    DOLSOT_RETURN_IF_ERROR(Missing(setup, report, "seccomp", filtered.message(),
                                   "use a kernel with CONFIG_SECCOMP_FILTER"));
  } else {
    options.allow_session_setup = false;
    walls->seccomp = BuildSeccompFilter(options);
    Active(report, "seccomp", "no_new_privs; " + std::to_string(SeccompDeniedNames().size()) +
                                  " system calls refused (ptrace, mount, unshare, bpf, ...), "
                                  "namespace clones, TIOCSTI" +
                                  (setup.policy.network ? "" : ", inet sockets") +
                                  " (the worker's own filter leaves mount, umount2, unshare and "
                                  "Landlock's calls to its sessions' keepers)");
  }
  Status probed = ProbeSessionWalls(*walls);
  if (!probed.ok() && !walls->overlays.empty() && ProbeSessionWalls(NoOverlays(*walls)).ok()) {
    // The sessions' own overlays are what fails: shared ones (the worker's) instead.
    DOLSOT_RETURN_IF_ERROR(Missing(setup, report, "overlay",
                                   "each session's own writable layer cannot be mounted (" +
                                       probed.message() + ")",
                                   "the overlays' writes are shared by the sessions instead"));
    *walls = NoOverlays(*walls);
    probed = Status::Ok();
  }
  if (!probed.ok()) {
    return Status(ErrorCode::kUnavailable,
                  "sandbox: the session-walls layer cannot be applied (" + probed.message() +
                      "); report this, or run one Repl per session");
  }
  return Status::Ok();
}

}  // namespace dolsot
