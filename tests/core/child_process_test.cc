// ChildProcess, with and without a pidfd: the destructor kills a child that
// ignores SIGTERM together with its process group (a grandchild dies too) and
// reaps it, leaving no zombie; Wait, TryReap and moves keep one owner.
#include "core/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>
#include "tests/support/test_pipe.h"

namespace dolsot {
namespace {

using Tracking = ChildProcess::Tracking;
using Group = ChildProcess::Group;

using testing_support::Pipe;

// Whether `pid` is still a child of ours that nobody reaped (a zombie or
// running).
bool Unreaped(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

// A child that sleeps until killed, in its own process group.
pid_t SleepingChild() {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    for (;;) ::pause();
  }
  ::setpgid(pid, pid);
  return pid;
}

class ChildProcessTest : public ::testing::TestWithParam<Tracking> {};

TEST_P(ChildProcessTest, TheDestructorKillsTheGroupOfAChildIgnoringSigtermAndReapsIt) {
  // Orphans come to this process, so the grandchild's death can be read.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  Pipe ready;  // the child writes the grandchild's pid here
  Pipe alive;  // held open by child and grandchild until they die
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setpgid(0, 0);
    ::signal(SIGTERM, SIG_IGN);
    pid_t grandchild = ::fork();
    if (grandchild == 0) {
      for (;;) ::pause();
    }
    (void)!::write(ready.write_end.get(), &grandchild, sizeof grandchild);
    for (;;) ::pause();
  }
  ::setpgid(pid, pid);
  ready.write_end.Reset();
  alive.write_end.Reset();
  pid_t grandchild = -1;
  ASSERT_EQ(::read(ready.read_end.get(), &grandchild, sizeof grandchild),
            static_cast<ssize_t>(sizeof grandchild));
  {
    ChildProcess child = ChildProcess::Adopt(pid, Group::kOwn, GetParam());
    EXPECT_EQ(child.pid(), pid);
    EXPECT_EQ(child.pidfd() >= 0, GetParam() == Tracking::kPidfdIfAvailable);
    ASSERT_TRUE(child.Signal(SIGTERM).ok());  // ignored
  }
  EXPECT_FALSE(Unreaped(pid));  // reaped: no zombie left
  char byte;
  EXPECT_EQ(::read(alive.read_end.get(), &byte, 1), 0);  // both are gone
  int status = 0;
  ASSERT_EQ(::waitpid(grandchild, &status, 0), grandchild);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
}

TEST_P(ChildProcessTest, WaitGivesTheExitStatusAndReapsOnce) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(3);
  ChildProcess child = ChildProcess::Adopt(pid, Group::kInherited, GetParam());
  auto status = child.Wait();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(DescribeWaitStatus(*status), "exited with status 3");
  EXPECT_EQ(child.pid(), -1);
  EXPECT_FALSE(Unreaped(pid));
  EXPECT_EQ(child.wait_status(), *status);
  EXPECT_EQ(child.Wait().value(), *status);  // asked again: the same answer
  EXPECT_EQ(child.Signal(SIGKILL).code(), ErrorCode::kUnavailable);
}

TEST_P(ChildProcessTest, WaitUntilADeadlineKeepsARunningChild) {
  ChildProcess child = ChildProcess::Adopt(SleepingChild(), Group::kOwn, GetParam());
  pid_t pid = child.pid();
  EXPECT_FALSE(child.TryReap().has_value());
  auto early = child.Wait(ChildProcess::Clock::now() + std::chrono::milliseconds(5));
  EXPECT_EQ(early.status().code(), ErrorCode::kTimeout);
  EXPECT_EQ(child.pid(), pid);  // still owned
  child.Kill();
  auto status = child.Wait(ChildProcess::Clock::now() + std::chrono::minutes(5));
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(DescribeWaitStatus(*status), "killed by signal 9 (SIGKILL)");
  EXPECT_FALSE(Unreaped(pid));
}

TEST_P(ChildProcessTest, TryReapTakesAnExitedChildWithoutWaiting) {
  Pipe go;
  pid_t pid = ::fork();
  if (pid == 0) {
    char byte;
    ::_exit(::read(go.read_end.get(), &byte, 1) == 1 ? 0 : 1);
  }
  go.read_end.Reset();
  ChildProcess child = ChildProcess::Adopt(pid, Group::kInherited, GetParam());
  EXPECT_FALSE(child.TryReap().has_value());
  ASSERT_EQ(::write(go.write_end.get(), "x", 1), 1);
  // Readiness, then the reap (a pidfd is readable once the child exited).
  ASSERT_TRUE(child.Wait().ok());
  EXPECT_EQ(child.TryReap(), 0);
}

INSTANTIATE_TEST_SUITE_P(BothTrackings, ChildProcessTest,
                         ::testing::Values(Tracking::kPidfdIfAvailable, Tracking::kPidOnly),
                         [](const auto& info) {
                           return info.param == Tracking::kPidOnly ? std::string("PidOnly")
                                                                   : std::string("Pidfd");
                         });

TEST(ChildProcess, MovesKeepOneOwner) {
  pid_t first = SleepingChild();
  pid_t second = SleepingChild();
  ChildProcess a = ChildProcess::Adopt(first, Group::kOwn);
  ChildProcess b = std::move(a);
  EXPECT_EQ(a.pid(), -1);  // NOLINT(bugprone-use-after-move): moved from, owns nothing
  EXPECT_EQ(b.pid(), first);
  ChildProcess c = ChildProcess::Adopt(second, Group::kOwn);
  c = std::move(b);  // the child c owned is killed and reaped first
  EXPECT_FALSE(Unreaped(second));
  EXPECT_TRUE(Unreaped(first));
  { ChildProcess moved_from = std::move(a); }  // owns nothing: kills nothing
  EXPECT_TRUE(Unreaped(first));
  c = ChildProcess();
  EXPECT_FALSE(Unreaped(first));
}

TEST(ChildProcess, AnEmptyOneOwnsNothing) {
  ChildProcess none;
  EXPECT_FALSE(none);
  none.Kill();
  EXPECT_FALSE(none.TryReap().has_value());
  EXPECT_EQ(none.Wait().status().code(), ErrorCode::kUnavailable);
  EXPECT_FALSE(ChildProcess::Adopt(-1, Group::kOwn));
}

// The child reads and writes `io` as its stdin and stdout, even when `io`
// is this process's own fd 0 (dup2 onto itself would leave it close-on-exec
// in the child), in a process group of its own, with the environment given.
TEST(SpawnWithStdio, TheChildTalksOnIoEvenWhenIoIsStdin) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  int saved_stdin = ::dup(STDIN_FILENO);
  ASSERT_GE(saved_stdin, 0);
  ASSERT_EQ(::dup3(sv[1], STDIN_FILENO, O_CLOEXEC), STDIN_FILENO);
  std::vector<std::string> env = {"GREETING=got"};
  auto pid = SpawnWithStdio({"/bin/sh", "-c", "read x; echo \"$GREETING:$x:$(cut -d' ' -f5 /proc/$$/stat)\""},
                            &env, STDIN_FILENO);
  ::dup2(saved_stdin, STDIN_FILENO);
  ::close(saved_stdin);
  ::close(sv[1]);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  ChildProcess child = ChildProcess::Adopt(*pid, Group::kOwn);
  ASSERT_EQ(::write(sv[0], "hi\n", 3), 3);
  std::string out;
  char buf[128];
  for (ssize_t n; (n = ::read(sv[0], buf, sizeof(buf))) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(sv[0]);
  EXPECT_EQ(out, "got:hi:" + std::to_string(*pid) + "\n");
  auto status = child.Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
}

TEST(SpawnWithStdio, AProgramThatCannotRunIsAnErrorNamingIt) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  auto pid = SpawnWithStdio({"/nonexistent/dolsot-helper"}, nullptr, sv[1]);
  ::close(sv[0]);
  ::close(sv[1]);
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find("cannot run /nonexistent/dolsot-helper"), std::string::npos)
      << pid.status().message();
  EXPECT_FALSE(SpawnWithStdio({}, nullptr, 0).ok());
}

}  // namespace
}  // namespace dolsot
