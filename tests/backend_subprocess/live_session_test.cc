// LiveSession against a scripted session process (a child of this test on
// the other end of a socket pair): a cell's code can write frames to the
// host, so a RESULT naming a pid other than its sender's (pid 1, whose
// group kill would signal every process of this user; the host; an
// unrelated process), or a snapshot socket it does not carry, is a clear
// error, never a kill.
#include "backend_subprocess/live_session.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "backend_subprocess/protocol.h"

namespace dolsot {
namespace {

using protocol::PayloadWriter;
using protocol::Tag;

constexpr std::uint32_t kClaimOwnPid = 0xffffffffu;

// In a forked child: serves one RUN on `session` with a RESULT ending in
// `pid` (its own when kClaimOwnPid) and `carried`, then exits.
[[noreturn]] void AnswerAndExit(int session, std::uint32_t pid, std::uint8_t carried) {
  auto run = protocol::ReadFrame(session);
  if (!run.ok() || run->tag != Tag::kRun) ::_exit(1);
  Result result;
  result.ok = true;
  result.value = "2";
  PayloadWriter w;
  protocol::WriteResult(w, result);
  w.U8(0);  // no sync checkpoint
  w.Strs({});  // no threads
  w.Strs({});  // no names bound anew
  w.U32(pid == kClaimOwnPid ? static_cast<std::uint32_t>(::getpid()) : pid).U8(carried);
  ::_exit(protocol::WriteFrame(session, Tag::kResult, w.data()).ok() ? 0 : 1);
}

StatusOr<CellOutcome> RunOnce(std::uint32_t pid, std::uint8_t carried) {
  auto pair = protocol::SocketPair();
  EXPECT_TRUE(pair.ok());
  pid_t fake = ::fork();
  if (fake == 0) {
    pair->first.Reset();
    AnswerAndExit(pair->second.get(), pid, carried);
  }
  pair->second.Reset();
  WorkerSettings settings;
  settings.snapshots = false;
  settings.checkpoint = CheckpointMode::kOff;
  ProcessChannel channel;
  channel.socket = std::move(pair->first);  // no identity: nothing to signal
  auto session = LiveSession::Adopt(std::move(channel), settings);
  CellRun run;
  run.code = "1+1";
  run.max_output = 1 << 20;
  run.timeout_seconds = 30;
  auto outcome = session->Run(run, nullptr);
  session.reset();  // kills the fake if the host vouched for it (and it still runs)
  int status = 0;
  EXPECT_EQ(::waitpid(fake, &status, 0), fake);
  EXPECT_TRUE((WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
              (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
      << status;
  return outcome;
}

// A process of this test, sleeping in its own process group until killed.
pid_t Victim() {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    for (;;) ::pause();
  }
  ::setpgid(pid, pid);
  return pid;
}

// The signal that ends `victim` when this test sends SIGTERM: SIGTERM if
// nothing killed it before.
int EndVictim(pid_t victim) {
  ::kill(victim, SIGTERM);
  int status = 0;
  EXPECT_EQ(::waitpid(victim, &status, 0), victim);
  return WIFSIGNALED(status) ? WTERMSIG(status) : -1;
}

TEST(LiveSession, AResultFromItsAttestedSenderIsTaken) {
  auto outcome = RunOnce(kClaimOwnPid, 0);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_EQ(outcome->result.value, "2");
}

TEST(LiveSession, AResultNamingPidOneOrNoneIsCorrupt) {
  for (std::uint32_t pid : {0u, 1u}) {
    auto outcome = RunOnce(pid, 0);
    ASSERT_FALSE(outcome.ok()) << pid;
    EXPECT_EQ(outcome.status().code(), ErrorCode::kCorrupt) << pid;
    EXPECT_NE(outcome.status().message().find("pid"), std::string::npos);
  }
}

// Before: the host took the pid on the RESULT's word, and its next kill
// (a timeout, a teardown) SIGKILLed that pid's process group.
TEST(LiveSession, AResultNamingAnotherProcessIsCorruptAndThatProcessIsNotSignalled) {
  pid_t victim = Victim();
  for (pid_t named : {victim, ::getpid()}) {
    auto outcome = RunOnce(static_cast<std::uint32_t>(named), 0);
    ASSERT_FALSE(outcome.ok());
    EXPECT_EQ(outcome.status().code(), ErrorCode::kCorrupt);
    EXPECT_NE(outcome.status().message().find("the kernel says pid"), std::string::npos)
        << outcome.status().message();
  }
  EXPECT_EQ(EndVictim(victim), SIGTERM);
}

TEST(LiveSession, AResultClaimingASnapshotSocketWithRollbackOffIsCorrupt) {
  auto outcome = RunOnce(kClaimOwnPid, protocol::kCarriesSnapshotSocket);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(outcome.status().message().find("socket"), std::string::npos);
}

// A read-only cell may leave its names out only after a RUN that said the
// host holds them (kRunHostHasNames): never on a session's first RUN, and
// never for a cell that was not read-only.
TEST(LiveSession, NamesLeftOutWhereTheHostHasNoneToUseAreCorrupt) {
  for (std::uint8_t carried : {protocol::kNamesUnchanged,
                               static_cast<std::uint8_t>(protocol::kNamesUnchanged |
                                                         protocol::kReadOnlyCell)}) {
    auto outcome = RunOnce(kClaimOwnPid, carried);
    ASSERT_FALSE(outcome.ok()) << int(carried);
    EXPECT_EQ(outcome.status().code(), ErrorCode::kCorrupt);
    EXPECT_NE(outcome.status().message().find("names were unchanged"), std::string::npos)
        << outcome.status().message();
  }
}

// A CHECKPOINT_DATA payload; `delta_flag` 1 adds a delta section (against
// a base of 5000 bytes, print 77) keeping `kept`.
std::string CheckpointPayload(const std::string& blob, const std::vector<std::string>& saved,
                              const std::vector<std::string>& dropped, std::uint64_t size,
                              std::uint8_t delta_flag = 0,
                              const std::vector<std::string>& kept = {}) {
  PayloadWriter w;
  w.Strs(saved).Strs(dropped).U8(delta_flag);
  if (delta_flag == 1) w.U64(5000).U32(77).Strs(kept);
  w.U64(size);
  return blob + w.data();
}

TEST(CheckpointData, ADeltaSaysItsBaseAndTheNamesItKept) {
  const std::string blob = "DOLSOTNS" + std::string(30, '\x02');
  auto data = ParseCheckpointData(CheckpointPayload(blob, {"a", "big", "df"}, {}, blob.size(), 1,
                                                    {"big", "df"}));
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_TRUE(data->delta);
  EXPECT_EQ(data->delta_of.size, 5000u);
  EXPECT_EQ(data->delta_of.fingerprint, 77u);
  EXPECT_EQ(data->kept, (std::vector<std::string>{"big", "df"}));
  EXPECT_EQ(data->blob, blob);
  auto whole = ParseCheckpointData(CheckpointPayload(blob, {"a"}, {}, blob.size()));
  ASSERT_TRUE(whole.ok());
  EXPECT_FALSE(whole->delta);
  EXPECT_TRUE(whole->kept.empty());
  // A flag other than 0 or 1, kept names out of order, repeated or empty.
  for (const std::string& payload :
       {CheckpointPayload(blob, {"a"}, {}, blob.size(), 2),
        CheckpointPayload(blob, {"a"}, {}, blob.size(), 1, {"df", "big"}),
        CheckpointPayload(blob, {"a"}, {}, blob.size(), 1, {"big", "big"}),
        CheckpointPayload(blob, {"a"}, {}, blob.size(), 1, {""}),
        CheckpointPayload(blob, {"a"}, {}, blob.size(), 1, {std::string("a\0b", 3)})}) {
    auto bad = ParseCheckpointData(payload);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), ErrorCode::kCorrupt) << bad.status().ToString();
  }
}

TEST(CheckpointData, TheBlobKeepsThePayloadsBufferAndTheNamesComeFromItsEnd) {
  const std::string blob = "DOLSOTNS" + std::string(100, '\x01');
  std::string payload = CheckpointPayload(blob, {"a", "bc"}, {"lock"}, blob.size());
  const char* buffer = payload.data();
  auto data = ParseCheckpointData(std::move(payload));
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(data->blob, blob);
  EXPECT_EQ(data->blob.data(), buffer);  // not copied
  EXPECT_EQ(data->saved, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(data->dropped, (std::vector<std::string>{"lock"}));
  auto empty = ParseCheckpointData(CheckpointPayload("", {}, {}, 0));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->blob.empty());
}

TEST(CheckpointData, AMalformedPayloadIsCorrupt) {
  const std::string blob(40, 'b');
  const std::string good = CheckpointPayload(blob, {"a"}, {}, blob.size());
  const std::vector<std::string> bad = {
      "",
      "1234567",                                            // shorter than the size
      CheckpointPayload(blob, {"a"}, {}, blob.size() + 1000),  // a blob past the end
      CheckpointPayload(blob, {"a"}, {}, blob.size() - 1),    // names that do not parse
      good.substr(0, good.size() - 9) + good.substr(good.size() - 8),  // cut inside the names
      CheckpointPayload(blob, {"a"}, {}, ~std::uint64_t{0}),
  };
  for (const std::string& payload : bad) {
    auto data = ParseCheckpointData(payload);
    EXPECT_FALSE(data.ok()) << payload.size();
    if (!data.ok()) {
      EXPECT_EQ(data.status().code(), ErrorCode::kCorrupt);
    }
  }
}

}  // namespace
}  // namespace dolsot
