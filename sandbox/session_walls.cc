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

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/unique_fd.h"
#include "sandbox/proc_masks.h"
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
    // What the worker hid inside this overlay's target, hidden again on
    // top of it: an empty read-only tmpfs, as the worker's (mount_plan.h).
    for (const std::string& hide : overlays[i].hides) {
      if (::mount("tmpfs", hide.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "mode=0755,size=16k") != 0) {
        return Failed("hide " + hide + " inside the session's overlay at " + overlays[i].target);
      }
    }
  }
  if (::umount2(kSandboxScratch, MNT_DETACH) != 0) return Failed("detach the overlay layers");
  for (const SessionOverlay& o : overlays) {
    if (::umount2(o.lower.c_str(), MNT_DETACH) != 0) return Failed("detach " + o.lower);
  }
  return Status::Ok();
}

// A mount point of /proc/self/mountinfo, its octal escapes (\040 for a
// space, \011, \012, \134) decoded.
std::string MountinfoPath(const std::string& field) {
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() &&
        field[i + 1] >= '0' && field[i + 1] <= '3' && field[i + 2] >= '0' && field[i + 2] <= '7' &&
        field[i + 3] >= '0' && field[i + 3] <= '7') {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

// The outermost mount points strictly below `dir` (sorted): what the
// worker bound there (a venv or toolbox directory that lives under /tmp on
// the host, a policy mount at /tmp/...).
std::vector<std::string> MountsBelow(const std::string& dir) {
  std::vector<std::string> points;
  std::ifstream info("/proc/self/mountinfo");
  std::string line;
  const std::string prefix = dir + "/";
  while (std::getline(info, line)) {
    std::size_t at = 0;
    std::string field;
    for (int i = 0; i < 5; ++i) {  // the fifth field: the mount point
      std::size_t end = line.find(' ', at);
      field = line.substr(at, end == std::string::npos ? std::string::npos : end - at);
      if (end == std::string::npos) break;
      at = end + 1;
    }
    std::string point = MountinfoPath(field);
    if (point.compare(0, prefix.size(), prefix) == 0) points.push_back(point);
  }
  std::sort(points.begin(), points.end());
  std::vector<std::string> outer;
  for (const std::string& p : points) {
    if (!outer.empty() && (p == outer.back() || p.compare(0, outer.back().size() + 1, outer.back() + "/") == 0)) {
      continue;  // below one kept already: it comes along (MS_REC)
    }
    outer.push_back(p);
  }
  return outer;
}

Status MakeDirs(const std::string& path) {
  for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string part = path.substr(0, slash);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return Failed("mkdir " + part);
    if (slash == std::string::npos) return Status::Ok();
  }
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
  // What the worker bound below the scratch would be hidden by the
  // session's tmpfs there: each is held (bound, with what is mounted below
  // it and its flags: read-only stays read-only) in the worker's /dev/shm,
  // which the session's own covers next, and bound back on the new tmpfs.
  // A file bound there (a toolbox module) is held on a file.
  struct Held {
    std::string point, hold;
    bool is_file = false;
  };
  std::vector<Held> held;
  for (const std::string& point : MountsBelow(kSandboxScratch)) {
    const std::string hold = "/dev/shm/.dolsot-hold-" + std::to_string(::getpid()) + "-" +
                             std::to_string(held.size());
    struct stat st {};
    const bool is_file = ::stat(point.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
    if (is_file) {
      UniqueFd made(::open(hold.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
      if (!made) return Failed("create " + hold);
    } else if (::mkdir(hold.c_str(), 0700) != 0) {
      return Failed("mkdir " + hold);
    }
    if (::mount(point.c_str(), hold.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      return Failed("hold " + point);
    }
    held.push_back({point, hold, is_file});
  }
  if (::mount("tmpfs", kSandboxScratch, "tmpfs", flags, ("mode=0755" + size).c_str()) != 0) {
    return Failed(std::string("mount the session's tmpfs on ") + kSandboxScratch);
  }
  for (const Held& h : held) {
    if (h.is_file) {
      const std::size_t slash = h.point.rfind('/');
      DOLSOT_RETURN_IF_ERROR(MakeDirs(h.point.substr(0, slash)));
      UniqueFd made(::open(h.point.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
      if (!made) return Failed("create " + h.point);
    } else {
      DOLSOT_RETURN_IF_ERROR(MakeDirs(h.point));
    }
    if (::mount(h.hold.c_str(), h.point.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      return Failed("bind " + h.point + " back");
    }
    if (::umount2(h.hold.c_str(), MNT_DETACH) != 0) return Failed("let go of " + h.hold);
    if (h.is_file) {
      ::unlink(h.hold.c_str());
    } else {
      ::rmdir(h.hold.c_str());
    }
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
  DOLSOT_RETURN_IF_ERROR(MaskProc("/proc", "/dev/null"));
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
