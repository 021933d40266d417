// LiveSession against a scripted session process (the other end of a socket
// pair, played by this test): a cell's code can write frames to the host, so
// a RESULT naming pid 1 (kill(-1) would signal every process of this user)
// or a runner socket it does not carry is a clear error, never a kill.
#include "backend_subprocess/live_session.h"

#include <gtest/gtest.h>

#include <thread>

#include "backend_subprocess/protocol.h"

namespace dolsot {
namespace {

using protocol::PayloadWriter;
using protocol::Tag;

// Serves one RUN on `session` with a RESULT ending in `pid` and `carried`.
void AnswerWith(int session, std::uint32_t pid, std::uint8_t carried) {
  auto run = protocol::ReadFrame(session);
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->tag, Tag::kRun);
  Result result;
  result.ok = true;
  result.value = "2";
  PayloadWriter w;
  protocol::WriteResult(w, result);
  w.U8(0);  // no sync checkpoint
  w.U32(pid).U8(carried);
  ASSERT_TRUE(protocol::WriteFrame(session, Tag::kResult, w.data()).ok());
}

StatusOr<CellOutcome> RunOnce(std::uint32_t pid, std::uint8_t carried) {
  auto pair = protocol::SocketPair();
  EXPECT_TRUE(pair.ok());
  WorkerSettings settings;
  settings.snapshots = false;
  settings.checkpoint = CheckpointMode::kOff;
  ProcessChannel channel;
  channel.socket = std::move(pair->first);  // pid -1: nothing to signal
  auto session = LiveSession::Adopt(std::move(channel), settings);
  std::thread fake([fd = pair->second.get(), pid, carried] { AnswerWith(fd, pid, carried); });
  CellRun run;
  run.code = "1+1";
  run.max_output = 1 << 20;
  run.timeout_seconds = 30;
  auto outcome = session->Run(run, nullptr);
  fake.join();
  return outcome;
}

TEST(LiveSession, AResultFromAPlausibleRunnerIsTaken) {
  auto outcome = RunOnce(4242, 0);
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

TEST(LiveSession, AResultClaimingARunnerSocketItDoesNotCarryIsCorrupt) {
  auto outcome = RunOnce(4242, protocol::kCarriesRunnerSocket);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(outcome.status().message().find("socket"), std::string::npos);
}

}  // namespace
}  // namespace dolsot
