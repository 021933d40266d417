// ProcessIdentity: the host signals a session process only when it can
// vouch for it. The check refuses pid 0 and 1, the host itself, the host's
// process group, a pid that is gone and a pid whose process started after it
// was vouched for (reused); a legitimate runner (a child leading its own
// group, named by its parent) is killed with its whole group. The kernel
// attests who wrote a frame on a socket that asks. A pin is a pidfd on the
// process itself, never on a later one of its pid.
#include "backend_subprocess/process_identity.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include "tests/support/test_pipe.h"

namespace dolsot {
namespace {

using protocol::Tag;

constexpr std::int64_t kSecond = 1'000'000'000;

using testing_support::Pipe;

// A child that sleeps until killed; in its own process group when `own_group`.
pid_t SleepingChild(bool own_group) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (own_group) ::setpgid(0, 0);
    for (;;) ::pause();
  }
  if (own_group) ::setpgid(pid, pid);
  return pid;
}

// Ends `pid` (our child) with SIGTERM and returns the signal it died of:
// SIGTERM when nothing killed it before.
int EndChild(pid_t pid) {
  ::kill(pid, SIGTERM);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return WIFSIGNALED(status) ? WTERMSIG(status) : -1;
}

TEST(ProcessIdentity, TheCheckRefusesWhatIsNoSessionProcess) {
  std::int64_t now = BootTimeNs();
  for (pid_t pid : {-1, 0, 1, ::getpid(), ::getpgrp()}) {
    Status check = CheckKillable(pid, now);
    EXPECT_EQ(check.code(), ErrorCode::kInvalidArgument) << pid << " " << check.ToString();
    EXPECT_FALSE(ProcessIdentity::ForTesting(pid, now).Kill()) << pid;
  }
  // A pid no process has (the top of the pid space is never handed out
  // this early): gone.
  EXPECT_EQ(CheckKillable(4194303, now).code(), ErrorCode::kUnavailable);
}

TEST(ProcessIdentity, AProcessThatStartedAfterItWasVouchedForIsRefused) {
  // The pid was vouched for a second before this process took it: a reused
  // pid, as when a runner was reaped and another process got its number.
  pid_t unrelated = SleepingChild(/*own_group=*/true);
  std::int64_t before = BootTimeNs() - kSecond;
  Status check = CheckKillable(unrelated, before);
  EXPECT_EQ(check.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(check.message().find("started after"), std::string::npos) << check.message();
  EXPECT_FALSE(ProcessIdentity::ForTesting(unrelated, before).Kill());
  EXPECT_EQ(EndChild(unrelated), SIGTERM);  // never signalled
}

TEST(ProcessIdentity, ExitedIsTheProcessItselfLivingOrNot) {
  EXPECT_FALSE(ProcessIdentity().Exited());  // unknown: nothing can be said
  pid_t child = SleepingChild(/*own_group=*/true);
  const ProcessIdentity identity = ProcessIdentity::ForTesting(child, BootTimeNs());
  EXPECT_FALSE(identity.Exited());
  // A process vouched for before this one took its pid was another: gone.
  EXPECT_TRUE(ProcessIdentity::ForTesting(child, BootTimeNs() - kSecond).Exited());
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_TRUE(identity.Exited());  // a zombie
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_TRUE(identity.Exited());  // reaped
}

// Whether `fd` polls readable now.
bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

TEST(ProcessIdentity, APinIsAPidfdOnTheProcessItselfReadableOnceItExits) {
  EXPECT_FALSE(ProcessIdentity().Pin());  // unknown
  pid_t child = SleepingChild(/*own_group=*/true);
  // Vouched for before the child took its pid: another process, no pin.
  EXPECT_FALSE(ProcessIdentity::ForTesting(child, BootTimeNs() - kSecond).Pin());
  const ProcessIdentity identity = ProcessIdentity::ForTesting(child, BootTimeNs());
  UniqueFd pin = identity.Pin();
  if (!pin) GTEST_SKIP() << "no pidfds on this kernel";
  EXPECT_FALSE(Readable(pin.get()));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_TRUE(Readable(pin.get()));  // a zombie
  EXPECT_FALSE(identity.Pin());
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_TRUE(Readable(pin.get()));  // reaped
  EXPECT_FALSE(identity.Pin());
}

TEST(ProcessIdentity, OnlyAChildLeadingItsOwnGroupIsVouchedForByItsParent) {
  ProcessIdentity host = ProcessIdentity::Trusted(::getpid());
  pid_t in_our_group = SleepingChild(/*own_group=*/false);
  EXPECT_FALSE(ProcessIdentity::ChildOf(host, in_our_group).known());
  EXPECT_FALSE(ProcessIdentity::ChildOf(host, 1).known());
  EXPECT_FALSE(ProcessIdentity::ChildOf(ProcessIdentity(), in_our_group).known());
  // An unrelated process (not this one's child) named by this one.
  ProcessIdentity not_its_parent = ProcessIdentity::Trusted(::getppid());
  pid_t runner = SleepingChild(/*own_group=*/true);
  EXPECT_FALSE(ProcessIdentity::ChildOf(not_its_parent, runner).known());
  EXPECT_TRUE(ProcessIdentity::ChildOf(host, runner).known());
  EXPECT_EQ(EndChild(in_our_group), SIGTERM);
  EXPECT_EQ(EndChild(runner), SIGTERM);
}

TEST(ProcessIdentity, ALegitimateRunnerIsKilledWithItsWholeGroup) {
  Pipe ready, alive;
  pid_t runner = ::fork();
  ASSERT_GE(runner, 0);
  if (runner == 0) {
    ::setpgid(0, 0);
    if (::fork() == 0) {
      for (;;) ::pause();  // a process the cell started, in the runner's group
    }
    (void)!::write(ready.write_end.get(), "r", 1);
    for (;;) ::pause();
  }
  ::setpgid(runner, runner);
  ready.write_end.Reset();
  alive.write_end.Reset();
  char byte;
  ASSERT_EQ(::read(ready.read_end.get(), &byte, 1), 1);
  ProcessIdentity identity = ProcessIdentity::ChildOf(ProcessIdentity::Trusted(::getpid()), runner);
  ASSERT_TRUE(identity.known());
  EXPECT_TRUE(CheckKillable(runner, identity.vouched_at_ns()).ok());
  EXPECT_TRUE(identity.Kill());
  EXPECT_EQ(::read(alive.read_end.get(), &byte, 1), 0);  // runner and grandchild gone
  int status = 0;
  ASSERT_EQ(::waitpid(runner, &status, 0), runner);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  // Reaped now: its pid is nobody's, and nothing is signalled.
  EXPECT_FALSE(identity.Kill());
}

// The frame `writer` (a forked child) sends on a socket pair; `attest` asks
// the kernel for its sender first.
protocol::Frame FrameFromChild(bool attest, pid_t* writer) {
  auto pair = protocol::SocketPair();
  EXPECT_TRUE(pair.ok());
  if (attest) {
    EXPECT_TRUE(protocol::AttestSenders(pair->first.get()).ok());
  }
  *writer = ::fork();
  if (*writer == 0) {
    ::_exit(protocol::WriteFrame(pair->second.get(), Tag::kResult, "r").ok() ? 0 : 1);
  }
  pair->second.Reset();
  auto frame = protocol::ReadFrame(pair->first.get());
  EXPECT_TRUE(frame.ok());
  int status = 0;
  EXPECT_EQ(::waitpid(*writer, &status, 0), *writer);
  return frame.ok() ? std::move(frame).value() : protocol::Frame{};
}

TEST(ProcessIdentity, TheKernelAttestsWhoWroteAFrame) {
  pid_t writer;
  protocol::Frame frame = FrameFromChild(/*attest=*/true, &writer);
  EXPECT_EQ(frame.sender, writer);
  auto taken = ProcessIdentity::FromSender(frame, writer, "RESULT");
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(taken->pid(), writer);
  auto forged = ProcessIdentity::FromSender(frame, ::getpid(), "RESULT");
  EXPECT_EQ(forged.status().code(), ErrorCode::kCorrupt);
  // Without asking, nobody is attested, and no claim is taken.
  frame = FrameFromChild(/*attest=*/false, &writer);
  EXPECT_EQ(frame.sender, 0);
  EXPECT_EQ(ProcessIdentity::FromSender(frame, writer, "RESULT").status().code(),
            ErrorCode::kCorrupt);
}

TEST(ProcessIdentity, AFrameWrittenByTwoProcessesHasNoSender) {
  auto pair = protocol::SocketPair();
  ASSERT_TRUE(pair.ok());
  ASSERT_TRUE(protocol::AttestSenders(pair->first.get()).ok());
  protocol::PayloadWriter header;
  header.U32(static_cast<std::uint32_t>(Tag::kResult)).U32(3);
  ASSERT_EQ(::write(pair->second.get(), header.data().data(), 8), 8);  // this process
  pid_t other = ::fork();
  if (other == 0) ::_exit(::write(pair->second.get(), "abc", 3) == 3 ? 0 : 1);
  int status = 0;
  ASSERT_EQ(::waitpid(other, &status, 0), other);
  auto frame = protocol::ReadFrame(pair->first.get());
  ASSERT_TRUE(frame.ok());
  EXPECT_EQ(frame->payload, "abc");
  EXPECT_EQ(frame->sender, 0);
}

}  // namespace
}  // namespace dolsot
