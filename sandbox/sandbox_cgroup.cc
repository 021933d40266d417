// The Sandbox's pids cgroup for a root host's worker (see sandbox_cgroup.h).
#include "sandbox/sandbox_cgroup.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <fstream>
#include <string_view>
#include <vector>

#include "sandbox/sandbox_layers.h"

namespace dolsot {
namespace {

using sandbox_layers::Active;
using sandbox_layers::Errno;
using sandbox_layers::Missing;
using sandbox_layers::WriteFile;

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
Status CapProcessesWithCgroupImpl(const SandboxPolicy& policy, SandboxReport* report) {
  const std::uint64_t max = policy.processes;
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
    return Missing(policy, report, "cgroup", "processes=" + std::to_string(max) +
                   " as root needs a pids cgroup (the kernel exempts root from RLIMIT_NPROC): " +
                   joined.message(), "mount the cgroup pids controller, run as a user other "
                   "than root, or pass processes=0");
  }
  Active(report, "cgroup", "pids.max " + std::to_string(max) + " (+1 for the worker's waiting "
                           "parent; a cgroup v1 pids controller, as root)");
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

Status CapProcessesWithCgroup(const SandboxPolicy& policy, SandboxReport* report) {
  return CapProcessesWithCgroupImpl(policy, report);
}

}  // namespace dolsot
