// SessionWalls: two keepers of one sandbox, each behind its own walls, cannot
// reach each other's scratch or processes, nor the worker (pid 1 here).
#include "sandbox/session_walls.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "sandbox/landlock_ruleset.h"
#include "tests/sandbox/sandbox_test_support.h"
#include "sandbox/sandbox_setup.h"

namespace dolsot {
namespace {

bool Opens(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

// In the sandbox's pid 1: keeper A writes its scratch and waits; keeper B
// tries to reach A's file, A and the worker.
std::string TwoKeepers(const SessionWalls& walls) {
  int ready[2], done[2], report[2];
  if (::pipe(ready) != 0 || ::pipe(done) != 0 || ::pipe(report) != 0) return "PIPE FAILED";
  pid_t a = ::fork();
  if (a == 0) {
    ::close(report[1]);  // B's report must end when B does
    Status walled = ApplySessionWalls(walls);
    std::ofstream("/tmp/a-secret") << "secret";
    char c = walled.ok() && Opens("/tmp/a-secret") ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(done[0], &c, 1);  // until B is done
    ::_exit(0);
  }
  char c = 0;
  (void)!::read(ready[0], &c, 1);
  std::string out = c == 'y' ? "A walled and wrote\n" : "A FAILED\n";
  pid_t b = ::fork();
  if (b == 0) {
    std::string seen;
    Status walled = ApplySessionWalls(walls);
    seen += walled.ok() ? "B walled\n" : "B FAILED: " + walled.message() + "\n";
    seen += Opens("/tmp/a-secret") ? "B READ A's FILE\n" : "B cannot read A's file\n";
    seen += Opens("/proc/" + std::to_string(a) + "/environ") ? "B READ A's ENVIRON\n"
                                                               : "B cannot read A's environ\n";
    seen += ::kill(a, 0) != 0 && errno == EPERM ? "B cannot signal A\n" : "B SIGNALS A\n";
    seen += ::kill(1, 0) != 0 && errno == EPERM ? "B cannot signal the worker\n"
                                                : "B SIGNALS THE WORKER\n";
    seen += ::kill(::getpid(), 0) == 0 ? "B signals itself\n" : "B CANNOT SIGNAL ITSELF\n";
    seen += ::unshare(0) != 0 && errno == EPERM ? "B cannot unshare\n" : "B MAY UNSHARE\n";
    (void)!::write(report[1], seen.data(), seen.size());
    ::_exit(0);
  }
  ::close(report[1]);
  char buf[1024];
  for (ssize_t n; (n = ::read(report[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  (void)!::write(done[1], "x", 1);
  ::waitpid(b, nullptr, 0);
  ::waitpid(a, nullptr, 0);
  return out;
}

TEST(SessionWalls, KeepersOfOneSandboxCannotReachEachOther) {
  if (LandlockAbi() < 6) GTEST_SKIP() << "signals are scoped from Landlock ABI 6";
  std::string text = InChild([] {
    SandboxSetup setup = UsrOnlySetup();
    auto entered = EnterSandbox(setup);
    if (!entered.ok()) return "ENTER FAILED: " + entered.status().message();
    SandboxReport report = *entered;
    SessionWalls walls;
    Status locked = LockSandbox(setup, &report, &walls);
    if (!locked.ok()) return "LOCK FAILED: " + locked.message();
    return report.ToText() + TwoKeepers(walls);
  });
  EXPECT_NE(text.find("[on ] session-walls"), std::string::npos) << text;
  for (const char* line : {"A walled and wrote", "B walled", "B cannot read A's file",
                           "B cannot read A's environ", "B cannot signal A",
                           "B cannot signal the worker", "B signals itself", "B cannot unshare"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

}  // namespace
}  // namespace dolsot
