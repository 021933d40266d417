// The sandbox's layers, applied in the worker (see sandbox_setup.h): the
// orchestration, the namespaces, rlimits and the locking layers; the new root
// is sandbox_root.cc's, the cgroup sandbox_cgroup.cc's.
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
#include "sandbox/landlock_ruleset.h"
#include "sandbox/seccomp_filter.h"
#include "sandbox/sandbox_cgroup.h"
#include "sandbox/sandbox_layers.h"
#include "sandbox/sandbox_root.h"
#include "sandbox/session_walls.h"

namespace dolsot {
namespace {

using sandbox_layers::Active;
using sandbox_layers::Errno;
using sandbox_layers::Missing;
using sandbox_layers::WriteFile;

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

Status EnterUserNamespace(const SandboxSetup& setup, SandboxReport* report) {
  uid_t uid = ::getuid();
  gid_t gid = ::getgid();
  if (::unshare(CLONE_NEWUSER) != 0) {
    std::string why = Errno("unshare(CLONE_NEWUSER)");
    if (errno == EINVAL) why += " (the worker is not single-threaded)";
    return Missing(setup.policy, report, "user-namespace", why,
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
  DOLSOT_RETURN_IF_ERROR(CapProcessesWithCgroup(setup.policy, &report));
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
    return Missing(setup.policy, report, "session-walls", lacking,
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
    DOLSOT_RETURN_IF_ERROR(Missing(setup.policy, report, "rlimits", limited.message(), "raise the hard limits"));
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
    DOLSOT_RETURN_IF_ERROR(Missing(setup.policy, report, "landlock",
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
      if (::stat(lower.c_str(), &st) != 0) continue;
      SessionOverlay overlay{lower, op.target, {}};
      for (const MountOp& hide : setup.plan) {
        if (hide.kind == MountOpKind::kHide && hide.target != op.target &&
            PathUnder(hide.target, op.target)) {
          overlay.hides.push_back(hide.target);
        }
      }
      walls->overlays.push_back(std::move(overlay));
    }
  }
  DOLSOT_RETURN_IF_ERROR(ReportSessionWalls(setup, *walls, abi, report));
  // The keepers mount (CAP_SYS_ADMIN), then empty their bounding set
  // (CAP_SETPCAP) and every other set.
  Status dropped = DropCapabilities(
      walls->private_mounts ? kKeeperCapabilities : 0);
  if (!dropped.ok()) {
    DOLSOT_RETURN_IF_ERROR(Missing(setup.policy, report, "capabilities", dropped.message(), "report this"));
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
    DOLSOT_RETURN_IF_ERROR(Missing(setup.policy, report, "seccomp", filtered.message(),
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
    DOLSOT_RETURN_IF_ERROR(Missing(setup.policy, report, "overlay",
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
