// CheckpointSaver: saves in submission order whatever order the writers send
// in, skips a channel closed without data, wakes for a channel submitted
// while it sleeps (Submit itself wakes no thread), and Stop gives up on a
// writer that never sends, as Drop does on a reset session's.
#include "backend_subprocess/checkpoint_saver.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <string>
#include <utility>
#include <vector>

#include "backend_subprocess/protocol.h"

namespace dolsot {
namespace {

struct Saved {
  std::mutex mutex;
  std::vector<std::pair<std::string, std::string>> items;  // session, blob
};

CheckpointSaver::SaveFunction Recorder(Saved& saved) {
  return [&saved](const std::string& sid, CheckpointData data, std::uint64_t) {
    std::lock_guard<std::mutex> guard(saved.mutex);
    saved.items.emplace_back(sid, data.blob);
  };
}

// CHECKPOINT_DATA as a session sends it: the blob, its names, its size.
std::string CheckpointPayload(const std::string& blob) {
  protocol::PayloadWriter w;
  w.Strs({"x"}).Strs({}).U8(0).U64(blob.size());
  return blob + w.data();
}

void SendCheckpoint(int fd, const std::string& blob) {
  ASSERT_TRUE(
      protocol::WriteFrame(fd, protocol::Tag::kCheckpointData, CheckpointPayload(blob)).ok());
}

std::pair<UniqueFd, UniqueFd> Channel() {
  auto pair = protocol::SocketPair();
  EXPECT_TRUE(pair.ok());
  return std::move(pair).value();
}

TEST(CheckpointSaver, SavesInSubmissionOrder) {
  Saved saved;
  CheckpointSaver saver(Recorder(saved));
  auto [first_host, first_writer] = Channel();
  auto [second_host, second_writer] = Channel();
  saver.Submit("a", std::move(first_host));
  saver.Submit("b", std::move(second_host));
  SendCheckpoint(second_writer.get(), "two");  // the later one arrives first
  SendCheckpoint(first_writer.get(), "one");
  saver.Flush();
  ASSERT_EQ(saved.items.size(), 2u);
  EXPECT_EQ(saved.items[0], std::make_pair(std::string("a"), std::string("one")));
  EXPECT_EQ(saved.items[1], std::make_pair(std::string("b"), std::string("two")));
}

TEST(CheckpointSaver, AChannelClosedWithoutDataIsSkipped) {
  Saved saved;
  CheckpointSaver saver(Recorder(saved));
  auto [skipped_host, skipped_writer] = Channel();
  auto [kept_host, kept_writer] = Channel();
  saver.Submit("s", std::move(skipped_host));
  saver.Submit("s", std::move(kept_host));
  skipped_writer.Reset();  // superseded: its writer never started
  SendCheckpoint(kept_writer.get(), "newest");
  saver.Flush();
  ASSERT_EQ(saved.items.size(), 1u);
  EXPECT_EQ(saved.items[0].second, "newest");
}

// A burst of cells faster than the writers must not pile up one open channel
// per cell: a newer checkpoint of a session replaces one still waiting.
TEST(CheckpointSaver, ANewerCheckpointSupersedesOneStillWaiting) {
  Saved saved;
  DeferredCloser closer(100);
  CheckpointSaver saver(Recorder(saved), &closer);
  auto [slow_host, slow_writer] = Channel();
  saver.Submit("x", std::move(slow_host));  // the saver waits on this one
  // Behind "x" whatever the saver is doing, so both wait in the queue.
  auto [old_host, old_writer] = Channel();
  auto [new_host, new_writer] = Channel();
  saver.Submit("a", std::move(old_host));
  saver.Submit("a", std::move(new_host));
  // The superseded writer is stopped at once: a writer blocked on a channel
  // no one reads would hold up the session's next one, which waits for it.
  EXPECT_FALSE(protocol::WriteFrame(old_writer.get(), protocol::Tag::kCheckpointData, "x").ok());
  SendCheckpoint(new_writer.get(), "newest");
  SendCheckpoint(slow_writer.get(), "x1");
  saver.Flush();
  saver.Stop();  // the thread has closed what it was handed
  ASSERT_EQ(saved.items.size(), 2u);
  EXPECT_EQ(saved.items[0], std::make_pair(std::string("x"), std::string("x1")));
  EXPECT_EQ(saved.items[1], std::make_pair(std::string("a"), std::string("newest")));
  EXPECT_EQ(closer.Pending(), 0u);
  pollfd p{old_writer.get(), POLLOUT, 0};  // its reader is gone
  ASSERT_EQ(::poll(&p, 1, 0), 1);
  EXPECT_NE(p.revents & (POLLHUP | POLLERR), 0);
}

// A reset session's checkpoints: the one being read is abandoned, those
// queued are dropped (their writers stopped), none is saved once Drop
// returns, and the other sessions' are saved as before.
TEST(CheckpointSaver, DropGivesUpASessionsCheckpointsAndNoOthers) {
  Saved saved;
  CheckpointSaver saver(Recorder(saved));
  auto [read_host, read_writer] = Channel();
  saver.Submit("gone", std::move(read_host));  // the saver waits on its writer
  auto [kept_host, kept_writer] = Channel();
  auto [queued_host, queued_writer] = Channel();
  saver.Submit("kept", std::move(kept_host));
  saver.Submit("gone", std::move(queued_host));
  saver.Drop("gone");  // returns though neither "gone" writer ever sent
  EXPECT_FALSE(saver.Pending("gone"));
  EXPECT_FALSE(protocol::WriteFrame(queued_writer.get(), protocol::Tag::kCheckpointData, "x").ok());
  // Being read or still queued when Drop came, its writer is stopped too.
  EXPECT_FALSE(protocol::WriteFrame(read_writer.get(), protocol::Tag::kCheckpointData,
                                    CheckpointPayload("late")).ok());
  SendCheckpoint(kept_writer.get(), "k");
  saver.Flush();
  ASSERT_EQ(saved.items.size(), 1u);
  EXPECT_EQ(saved.items[0], std::make_pair(std::string("kept"), std::string("k")));
}

TEST(CheckpointSaver, WakesForAChannelSubmittedWhileItSleeps) {
  Saved saved;
  CheckpointSaver saver(Recorder(saved));
  for (int round = 0; round < 20; ++round) {
    // Flushed, the saver has nothing to do: it goes back to sleep, and the
    // next Submit must not be lost (Flush would then never return).
    auto [host, writer] = Channel();
    saver.Submit("s", std::move(host));
    SendCheckpoint(writer.get(), std::to_string(round));
    saver.Flush();
    ASSERT_EQ(saved.items.size(), static_cast<std::size_t>(round + 1));
    EXPECT_EQ(saved.items.back().second, std::to_string(round));
  }
}

// The idle saver watches only the front channel of its queue. When a newer
// checkpoint of that session replaces it and the replaced channel is closed
// at once (Repl::Reset closes what the host set aside before it flushes),
// the saver must still wake for the jobs left: a close drops the readiness
// epoll_wait had not returned yet, and Flush once hung there forever. (Each
// round the saver may also be busy still, or take the first channel before
// it is replaced; the round must end either way.)
TEST(CheckpointSaver, ReplacingTheWatchedChannelLosesNoWakeUp) {
  Saved saved;
  DeferredCloser closer(100);
  CheckpointSaver saver(Recorder(saved), &closer);
  for (int round = 0; round < 200; ++round) {
    auto [first_host, first_writer] = Channel();
    auto [other_host, other_writer] = Channel();
    auto [newer_host, newer_writer] = Channel();
    saver.Submit("a", std::move(first_host));  // watched while the saver sleeps
    saver.Submit("b", std::move(other_host));
    saver.Submit("a", std::move(newer_host));  // replaces the watched one
    // Its writer stops, as a replaced one does (a saver that took the first
    // channel before it was replaced reads its end instead of waiting).
    first_writer.Reset();
    closer.CloseAll();
    SendCheckpoint(other_writer.get(), "b" + std::to_string(round));
    SendCheckpoint(newer_writer.get(), "a" + std::to_string(round));
    saver.Flush();  // hangs (the test times out) if the wake-up was lost
    ASSERT_GE(saved.items.size(), 2u);
    std::lock_guard<std::mutex> guard(saved.mutex);
    EXPECT_EQ(saved.items.back().second, "a" + std::to_string(round));
  }
}

TEST(CheckpointSaver, StopGivesUpOnAWriterThatNeverSends) {
  Saved saved;
  CheckpointSaver saver(Recorder(saved));
  auto [host, writer] = Channel();
  saver.Submit("s", std::move(host));
  saver.Stop(std::chrono::milliseconds(50));  // returns although nothing came
  EXPECT_TRUE(saved.items.empty());
  // The saver gave the channel up: this write may fail, and nothing is saved.
  (void)protocol::WriteFrame(writer.get(), protocol::Tag::kCheckpointData,
                             CheckpointPayload("late"));
  saver.Submit("s", Channel().first);    // after Stop: dropped
  EXPECT_TRUE(saved.items.empty());
}

}  // namespace
}  // namespace dolsot
