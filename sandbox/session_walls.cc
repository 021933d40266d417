// The walls between a sandboxed worker's sessions (see session_walls.h).
#include "sandbox/session_walls.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/unique_fd.h"
#include "sandbox/sandbox_policy.h"
#include "sandbox/seccomp_filter.h"

namespace dolsot {
namespace {

Status Failed(const std::string& what) {
  return Status(ErrorCode::kUnavailable, what + ": " + std::strerror(errno));
}

std::string SizeOption(std::uint64_t mb) {
  return mb == 0 ? std::string() : ",size=" + std::to_string(mb) + "m";
}

// The lineage's own /tmp, /dev/shm and /proc, in a mount namespace of its
// own, and its own System V IPC and POSIX message queues (an IPC namespace:
// Landlock does not mediate them). The worker's copies stay below,
// unreachable (a cell can neither unmount nor reach another mount
// namespace's paths: /proc/<pid>/root of a process outside its Landlock
// domain is refused).
// The session's own overlays: their writable layers on a tmpfs mounted on
// the scratch for a moment and detached once they are mounted (the
// overlays keep it; no path reaches it), then the host directories' binds
// detached too.
Status SessionOverlays(const std::vector<SessionOverlay>& overlays, const std::string& size) {
  if (::mount("tmpfs", kSandboxScratch, "tmpfs", MS_NOSUID | MS_NODEV, ("mode=0700" + size).c_str()) != 0) {
    return Failed("mount the session's overlay layers");
  }
  for (std::size_t i = 0; i < overlays.size(); ++i) {
    const std::string layer = std::string(kSandboxScratch) + "/" + std::to_string(i);
    if (::mkdir(layer.c_str(), 0700) != 0) return Failed("mkdir " + layer);
    Status mounted = MountOverlayfs(overlays[i].lower, overlays[i].target, layer);
    if (!mounted.ok()) {
      return Status(mounted.code(), "the session's overlay at " + overlays[i].target + ": " + mounted.message());
    }
  }
  if (::umount2(kSandboxScratch, MNT_DETACH) != 0) return Failed("detach the overlay layers");
  for (const SessionOverlay& o : overlays) {
    if (::umount2(o.lower.c_str(), MNT_DETACH) != 0) return Failed("detach " + o.lower);
  }
  return Status::Ok();
}

Status PrivateMounts(const SessionWalls& walls) {
  if (::unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0) return Failed("unshare(CLONE_NEWNS | CLONE_NEWIPC)");
  // Nothing mounted here may reach the worker's namespace or a sibling's.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return Failed("make the session's mounts private");
  }
  const unsigned long flags = MS_NOSUID | MS_NODEV;
  const std::string size = SizeOption(walls.disk_mb);
  if (!walls.overlays.empty()) DOLSOT_RETURN_IF_ERROR(SessionOverlays(walls.overlays, size));
  if (::mount("tmpfs", kSandboxScratch, "tmpfs", flags, ("mode=0755" + size).c_str()) != 0) {
    return Failed(std::string("mount the session's tmpfs on ") + kSandboxScratch);
  }
  if (::mount("tmpfs", "/dev/shm", "tmpfs", flags | MS_NOEXEC, ("mode=01777" + size).c_str()) != 0) {
    return Failed("mount the session's tmpfs on /dev/shm");
  }
  // hidepid=2: a process is listed only to those that may ptrace-read it,
  // which Landlock limits to its own domain (and those nested in it). The
  // exempt group (gid=, 0 by default: a root host's own) is one no process
  // here has: any but the worker's, the one gid its user namespace maps.
  const std::string exempt = std::to_string(::getgid() == 65533 ? 65532 : 65533);
  if (::mount("proc", "/proc", "proc", flags | MS_NOEXEC, ("hidepid=2,gid=" + exempt).c_str()) != 0) {
    return Failed("mount the session's /proc (hidepid=2)");
  }
  // The cwd still names the worker's scratch, now covered: the session's.
  if (::chdir(kSandboxScratch) != 0) return Failed(std::string("chdir ") + kSandboxScratch);
  return Status::Ok();
}

}  // namespace

Status MountOverlayfs(const std::string& lower, const std::string& target,
                      const std::string& layer) {
  for (const char* part : {"/upper", "/work"}) {
    if (::mkdir((layer + part).c_str(), 0755) != 0 && errno != EEXIST) {
      return Failed("mkdir " + layer + part);
    }
  }
  const std::string options =
      "lowerdir=" + lower + ",upperdir=" + layer + "/upper,workdir=" + layer + "/work";
  // The kernel copies at most a page of options: a longer string would be
  // cut, naming a shorter lower path or dropping the writable layer.
  if (options.size() + std::strlen(",userxattr") >= 4096) {
    return Status(ErrorCode::kUnavailable, "the host path is too long for overlayfs's options "
                                           "(at most a page in all)");
  }
  unsigned long flags = MS_NOSUID | MS_NODEV;
  if (::mount("overlay", target.c_str(), "overlay", flags, (options + ",userxattr").c_str()) != 0 &&
      ::mount("overlay", target.c_str(), "overlay", flags, options.c_str()) != 0) {
    const int err = errno;
    std::string why = std::string("mount overlayfs: ") + std::strerror(err);
    if (err == ENODEV) why += " (this kernel has no overlayfs: no 'overlay' module loaded)";
    if (err == EPERM || err == EINVAL) {
      why += " (overlayfs in a user namespace needs Linux 5.11 or later)";
    }
    return Status(ErrorCode::kUnavailable, why);
  }
  return Status::Ok();
}

Status DropCapabilities(std::uint64_t keep) {
  int last = CAP_LAST_CAP;
  std::ifstream in("/proc/sys/kernel/cap_last_cap");
  if (in) in >> last;
  for (int cap = 0; cap <= last && cap < 64; ++cap) {
    if ((keep >> cap) & 1) continue;
    if (::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 1) continue;  // gone already (or unknown)
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
      return Failed("drop capability " + std::to_string(cap));
    }
  }
  (void)::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  for (int half = 0; half < 2; ++half) {
    data[half].effective = data[half].permitted = static_cast<std::uint32_t>(keep >> (32 * half));
  }
  if (::syscall(SYS_capset, &header, data) != 0) return Failed("capset");
  return Status::Ok();
}

Status ApplySessionWalls(const SessionWalls& walls) {
  if (walls.private_mounts) DOLSOT_RETURN_IF_ERROR(PrivateMounts(walls));
  // Landlock after the mounts (a process in a domain may not mount) and
  // before seccomp (which refuses Landlock's calls).
  if (walls.landlock) {
    Status walled = ApplyLandlock(walls.paths, nullptr);
    if (!walled.ok()) return Status(walled.code(), "the session's Landlock domain: " + walled.message());
  }
  DOLSOT_RETURN_IF_ERROR(DropCapabilities(0));
  if (!walls.seccomp.empty()) {
    Status filtered = InstallSeccompFilter(walls.seccomp);
    if (!filtered.ok()) return Status(filtered.code(), "the session's seccomp filter: " + filtered.message());
  }
  return Status::Ok();
}

Status ProbeSessionWalls(const SessionWalls& walls) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Failed("pipe");
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  pid_t child = ::fork();
  if (child < 0) return Failed("fork a probe of the session walls");
  if (child == 0) {
    Status applied = ApplySessionWalls(walls);
    const std::string& message = applied.message();
    if (!applied.ok()) (void)!::write(write_end.get(), message.data(), message.size());
    ::_exit(applied.ok() ? 0 : 1);
  }
  write_end.Reset();
  std::string message;
  char buffer[512];
  ssize_t n;
  while ((n = ::read(read_end.get(), buffer, sizeof buffer)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    message.append(buffer, static_cast<std::size_t>(n));
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  if (message.empty()) message = "the probe ended with wait status " + std::to_string(status);
  return Status(ErrorCode::kUnavailable, message);
}

}  // namespace dolsot
