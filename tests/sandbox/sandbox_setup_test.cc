// EnterSandbox fails closed: a layer that cannot be applied is an error
// naming it and how to get it. (A caller with a second thread cannot enter a
// user namespace: a failure this test can cause for certain.) Also checks
// LockSandbox's layers in a forked child: seccomp refuses, Landlock walls.
#include "sandbox/sandbox_setup.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "sandbox/landlock_ruleset.h"
#include "tests/sandbox/sandbox_test_support.h"

namespace dolsot {
namespace {

std::string EnterWithAThreadRunning(bool best_effort) {
  std::atomic<bool> stop{false};
  std::thread other([&] {
    while (!stop) std::this_thread::yield();
  });
  SandboxSetup setup;
  setup.policy.best_effort = best_effort;
  auto report = EnterSandbox(setup);
  stop = true;
  other.join();
  return report.ok() ? "ENTERED\n" + report->ToText() : report.status().message();
}

TEST(SandboxSetup, AMissingUserNamespaceIsAnErrorNamingIt) {
  std::string text = InChild([] { return EnterWithAThreadRunning(false); });
  EXPECT_NE(text.find("the user-namespace layer cannot be applied"), std::string::npos) << text;
  EXPECT_NE(text.find("best_effort=True"), std::string::npos) << text;
}

TEST(SandboxSetup, BestEffortGoesOnWithoutTheLayerAndSaysSo) {
  if (::geteuid() != 0) GTEST_SKIP() << "without a user namespace only root can go on";
  std::string text = InChild([] { return EnterWithAThreadRunning(true); });
  EXPECT_NE(text.find("ENTERED"), std::string::npos) << text;
  EXPECT_NE(text.find("[off] user-namespace"), std::string::npos) << text;
  EXPECT_NE(text.find("not single-threaded"), std::string::npos) << text;
  EXPECT_NE(text.find("[on ] pid-namespace"), std::string::npos) << text;
}

// A host directory for the overlay tests, removed at the end.
class HostDir {
 public:
  HostDir() {
    char templ[] = "/tmp/dolsot-overlay-XXXXXX";
    path_ = ::mkdtemp(templ);
  }
  ~HostDir() { (void)!std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// EnterSandbox with one overlay of `host` at /data, then `body` inside.
template <typename Body>
std::string EnterWithOverlay(const std::string& host, bool best_effort, Body body) {
  return InChild([&] {
    SandboxSetup setup;
    setup.policy.best_effort = best_effort;
    setup.policy.mounts = {{"/data", host, MountMode::kOverlay}};
    setup.plan = {{MountOpKind::kOverlay, host, "/data", false}};
    auto report = EnterSandbox(setup);
    if (!report.ok()) return "FAILED: " + report.status().message();
    return "ENTERED\n" + report->ToText() + body();
  });
}

TEST(SandboxSetup, AnOverlayKeepsWritesInTheSandbox) {
  HostDir host;
  std::ofstream(host.path() + "/kept.txt") << "host bytes";
  std::string text = EnterWithOverlay(host.path(), false, [] {
    std::string out = "read: " + ReadAll("/data/kept.txt") + "\n";
    std::ofstream("/data/kept.txt", std::ios::app) << " + sandbox";
    std::ofstream("/data/new.txt") << "new";
    out += "after: " + ReadAll("/data/kept.txt") + "|" + ReadAll("/data/new.txt") + "\n";
    out += ::unlink("/data/kept.txt") == 0 ? "unlinked\n" : "unlink failed\n";
    return out;
  });
  EXPECT_NE(text.find("[on ] overlay: /data"), std::string::npos) << text;
  EXPECT_NE(text.find("read: host bytes\n"), std::string::npos) << text;
  EXPECT_NE(text.find("after: host bytes + sandbox|new\n"), std::string::npos) << text;
  EXPECT_NE(text.find("unlinked"), std::string::npos) << text;
  EXPECT_EQ(ReadAll(host.path() + "/kept.txt"), "host bytes");
  EXPECT_NE(::access((host.path() + "/new.txt").c_str(), F_OK), 0);
}

// `host`/top: an overlay over an overlay (two deep, overlayfs's limit) in a
// private mount namespace of the calling child, so that the sandbox's own
// overlay of it is one too many. "" when it is in place.
std::string StackTwoOverlays(const std::string& host) {
  if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return std::string("private mounts: ") + std::strerror(errno);
  }
  std::string lower = host + "/base";
  for (const char* level : {"one", "top"}) {
    const std::string dir = host + "/" + level, layer = host + "/" + level + "-layer";
    for (const std::string& d : {dir, layer, layer + "/upper", layer + "/work"}) ::mkdir(d.c_str(), 0755);
    const std::string options =
        "lowerdir=" + lower + ",upperdir=" + layer + "/upper,workdir=" + layer + "/work";
    if (::mount("overlay", dir.c_str(), "overlay", 0, options.c_str()) != 0) {
      return "overlay " + dir + ": " + std::strerror(errno);
    }
    lower = dir;
  }
  return "";
}

TEST(SandboxSetup, AnOverlayThatCannotBeMountedFailsClosedOrIsShownReadOnly) {
  // A host directory already two overlays deep: overlayfs refuses a third
  // (its stacking limit), a bind of it works.
  if (::geteuid() != 0) GTEST_SKIP() << "stacking the host's overlays needs root";
  HostDir host;
  ASSERT_EQ(::mkdir((host.path() + "/base").c_str(), 0755), 0);
  std::ofstream(host.path() + "/base/kept.txt") << "host bytes";
  const std::string top = host.path() + "/top";
  auto enter = [&](bool best_effort, auto body) {
    return InChild([&] {
      std::string stacked = StackTwoOverlays(host.path());
      if (!stacked.empty()) return "SETUP: " + stacked;
      SandboxSetup setup;
      setup.policy.best_effort = best_effort;
      setup.policy.mounts = {{"/data", top, MountMode::kOverlay}};
      setup.plan = {{MountOpKind::kOverlay, top, "/data", false, true}};
      auto report = EnterSandbox(setup);
      if (!report.ok()) return "FAILED: " + report.status().message();
      return "ENTERED\n" + report->ToText() + body();
    });
  };
  std::string closed = enter(false, [] { return std::string("RAN\n"); });
  if (closed.rfind("SETUP: ", 0) == 0) GTEST_SKIP() << closed;
  EXPECT_NE(closed.find("FAILED: sandbox: the overlay layer cannot be applied"), std::string::npos)
      << closed;
  EXPECT_NE(closed.find("best_effort=True"), std::string::npos) << closed;
  EXPECT_EQ(closed.find("RAN"), std::string::npos) << closed;

  std::string fewer = enter(true, [] {
    std::string out = "read: " + ReadAll("/data/kept.txt") + "\n";
    int fd = ::open("/data/new.txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    out += fd < 0 && errno == EROFS ? "write refused\n" : "WRITE ALLOWED\n";
    if (fd >= 0) ::close(fd);
    return out;
  });
  EXPECT_NE(fewer.find("[off] overlay: /data"), std::string::npos) << fewer;
  EXPECT_NE(fewer.find("shown read-only instead"), std::string::npos) << fewer;
  EXPECT_NE(fewer.find("read: host bytes"), std::string::npos) << fewer;
  EXPECT_NE(fewer.find("write refused"), std::string::npos) << fewer;
  EXPECT_NE(::access((host.path() + "/base/new.txt").c_str(), F_OK), 0);
}

TEST(SandboxSetup, AnOverlayOfAPathLongerThanOverlayfsOptionsTakeMounts) {
  // The overlay's lower layer is the sandbox's own bind of the host
  // directory (from its checked descriptor), not the host path: a path too
  // long for overlayfs's one-page option string still mounts.
  HostDir host;
  std::string deep = host.path();
  while (deep.size() < 3900) {
    deep += "/" + std::string(200, 'd');
    ASSERT_EQ(::mkdir(deep.c_str(), 0755), 0) << std::strerror(errno);
  }
  std::ofstream(deep + "/kept.txt") << "host bytes";
  std::string text = EnterWithOverlay(deep, false, [] { return "read: " + ReadAll("/data/kept.txt") + "\n"; });
  EXPECT_NE(text.find("[on ] overlay: /data"), std::string::npos) << text;
  EXPECT_NE(text.find("read: host bytes"), std::string::npos) << text;
}

TEST(SandboxSetup, BaseSystemPathsHoldUsr) {
  auto paths = BaseSystemPaths();
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths[0], "/usr");
}

TEST(SandboxSetup, LockSandboxAppliesEveryLayerInAChild) {
  if (LandlockAbi() < 1) GTEST_SKIP() << "Landlock is not enabled on this kernel";
  std::string text = InChild([] {
    SandboxSetup setup = UsrOnlySetup();
    // No user namespace here: a session's own mounts are off (reported).
    setup.policy.best_effort = true;
    SandboxReport report;
    SessionWalls walls;
    Status locked = LockSandbox(setup, &report, &walls);
    if (!locked.ok()) return "LOCK FAILED: " + locked.message();
    std::string out = report.ToText();
    // The worker's own filter leaves unshare to its keepers; a keeper's walls refuse it.
    out += ::unshare(0) == 0 ? "worker may unshare\n" : "worker REFUSED unshare\n";
    Status walled = ApplySessionWalls(walls);
    if (!walled.ok()) return "WALLS FAILED: " + walled.message();
    out += ::unshare(0x10000000) != 0 && errno == EPERM ? "unshare refused\n" : "unshare ALLOWED\n";
    auto opens = [](const char* path) {
      int fd = ::open(path, O_RDONLY | O_CLOEXEC);
      if (fd >= 0) ::close(fd);
      return fd >= 0;
    };
    out += !opens("/etc/hostname") ? "etc walled\n" : "etc OPEN\n";
    out += opens("/usr/bin") ? "usr readable\n" : "usr CLOSED\n";
    return out;
  });
  EXPECT_NE(text.find("[on ] seccomp"), std::string::npos) << text;
  EXPECT_NE(text.find("[on ] landlock"), std::string::npos) << text;
  EXPECT_NE(text.find("[on ] capabilities"), std::string::npos) << text;
  EXPECT_NE(text.find("[off] session-walls: each session's own /tmp"), std::string::npos) << text;
  EXPECT_NE(text.find("worker may unshare"), std::string::npos) << text;
  EXPECT_NE(text.find("unshare refused"), std::string::npos) << text;
  EXPECT_NE(text.find("etc walled"), std::string::npos) << text;
  EXPECT_NE(text.find("usr readable"), std::string::npos) << text;
}

// The host moves a just-spawned worker into its pids cgroup (the move's wait
// overlaps the worker's start); the cap holds for what the worker forks, and
// the cgroup is gone once the worker is reaped.
TEST(SandboxSetup, TheHostPlacesAWorkerInItsPidsCgroup) {
  if (::geteuid() != 0 || SandboxCgroupDir(1).empty()) {
    GTEST_SKIP() << "needs root and a cgroup v1 pids controller";
  }
  int go[2], told[2];
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(told, O_CLOEXEC), 0);
  pid_t worker = ::fork();
  ASSERT_GE(worker, 0);
  if (worker == 0) {
    char byte;
    if (::read(go[0], &byte, 1) != 1) ::_exit(2);
    // Two processes allowed (processes=1, +1): this one and one child.
    pid_t first = ::fork();
    if (first == 0) {
      ::pause();
      ::_exit(0);
    }
    pid_t second = ::fork();
    if (second == 0) ::_exit(0);
    char verdict = first > 0 && second < 0 && errno == EAGAIN ? 'y' : 'n';
    if (first > 0) ::kill(first, SIGKILL);
    (void)!::write(told[1], &verdict, 1);
    ::_exit(0);
  }
  ::close(go[0]);
  ::close(told[1]);
  ASSERT_TRUE(PlaceInSandboxCgroup(worker, 1).ok());
  const std::string dir = SandboxCgroupDir(worker);
  EXPECT_NE(ReadAll("/proc/" + std::to_string(worker) + "/cgroup")
                .find("/dolsot-sandbox-" + std::to_string(worker)),
            std::string::npos);
  EXPECT_EQ(ReadAll(dir + "/pids.max"), "2\n");
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  char verdict = 0;
  EXPECT_EQ(::read(told[0], &verdict, 1), 1);
  EXPECT_EQ(verdict, 'y') << "the second fork was not refused";
  int status = 0;
  ASSERT_EQ(::waitpid(worker, &status, 0), worker);
  ::close(go[1]);
  ::close(told[0]);
  RemoveSandboxCgroup(worker);
  EXPECT_NE(::access(dir.c_str(), F_OK), 0) << dir << " outlived its worker";
  // Not root's business without a cap: nothing is made.
  EXPECT_TRUE(PlaceInSandboxCgroup(::getpid(), 0).ok());
  EXPECT_NE(::access(SandboxCgroupDir(::getpid()).c_str(), F_OK), 0);
}

// A host killed with SIGKILL leaves its worker's dolsot-sandbox-<pid>
// behind; the next placement removes such empty directories, and never one
// with a process in it, nor another name. A directory already there under
// the new worker's pid (a reused pid) is taken over.
TEST(SandboxSetup, PlacingAWorkerSweepsEmptyStaleCgroupsOnly) {
  if (::geteuid() != 0 || SandboxCgroupDir(1).empty()) {
    GTEST_SKIP() << "needs root and a cgroup v1 pids controller";
  }
  const std::string one = SandboxCgroupDir(1);
  const std::string base = one.substr(0, one.rfind('/'));
  auto blocked_child = [](int (&gate)[2]) {
    EXPECT_EQ(::pipe2(gate, O_CLOEXEC), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      char byte;
      (void)!::read(gate[0], &byte, 1);
      ::_exit(0);
    }
    ::close(gate[0]);
    return pid;
  };
  int live_gate[2], next_gate[2];
  pid_t live = blocked_child(live_gate);
  ASSERT_GT(live, 0);
  ASSERT_TRUE(PlaceInSandboxCgroup(live, 4).ok());
  // pid_max is never a pid: a stale directory no live process can own.
  const std::string stale = base + "/dolsot-sandbox-" + Trimmed(ReadAll("/proc/sys/kernel/pid_max"));
  const std::string other = base + "/dolsot-sandbox-x" + std::to_string(::getpid());
  ASSERT_TRUE(::mkdir(stale.c_str(), 0755) == 0 || errno == EEXIST) << stale;  // EEXIST: a concurrent run's
  ASSERT_EQ(::mkdir(other.c_str(), 0755), 0) << other;
  pid_t next = blocked_child(next_gate);
  ASSERT_GT(next, 0);
  const std::string reused = SandboxCgroupDir(next);
  ASSERT_EQ(::mkdir(reused.c_str(), 0755), 0) << reused;

  EXPECT_TRUE(PlaceInSandboxCgroup(next, 4).ok());
  EXPECT_NE(::access(stale.c_str(), F_OK), 0) << stale << " was not swept";
  EXPECT_EQ(::access(other.c_str(), F_OK), 0) << "another name was touched";
  EXPECT_EQ(Trimmed(ReadAll(SandboxCgroupDir(live) + "/cgroup.procs")), std::to_string(live));
  EXPECT_EQ(Trimmed(ReadAll(reused + "/cgroup.procs")), std::to_string(next));
  EXPECT_EQ(ReadAll(reused + "/pids.max"), "5\n");

  for (auto [pid, gate] : {std::pair{live, live_gate[1]}, std::pair{next, next_gate[1]}}) {
    EXPECT_EQ(::write(gate, "g", 1), 1);  // a byte: the other child holds this pipe's end too
    ::close(gate);
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    RemoveSandboxCgroup(pid);
    EXPECT_NE(::access(SandboxCgroupDir(pid).c_str(), F_OK), 0);
  }
  ::rmdir(stale.c_str());
  EXPECT_EQ(::rmdir(other.c_str()), 0);
}

}  // namespace
}  // namespace dolsot
