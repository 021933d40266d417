// live_output_stream.h: delivery on the stream's own thread, in order;
// max_output then one notice; UTF-8 never split between chunks; a blocked
// callback never blocks the producer (drop with a count, said once); Flush
// waits for what came before; nothing is called after Finish.
#include "core/live_output_stream.h"

#include "core/utf8.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dolsot {
namespace {

// What the callbacks saw, in order: text as is, an image as "<image:BYTES>".
struct Seen {
  std::mutex mutex;
  std::vector<std::string> calls;
  std::vector<std::thread::id> threads;

  OutputCallbacks Callbacks() {
    OutputCallbacks callbacks;
    callbacks.on_output = [this](std::string_view text) { Add(std::string(text)); };
    callbacks.on_image = [this](std::string_view png) { Add("<image:" + std::string(png) + ">"); };
    return callbacks;
  }
  void Add(std::string call) {
    std::lock_guard<std::mutex> lock(mutex);
    calls.push_back(std::move(call));
    threads.push_back(std::this_thread::get_id());
  }
  std::string Joined() {
    std::lock_guard<std::mutex> lock(mutex);
    std::string all;
    for (const std::string& call : calls) all += call;
    return all;
  }
};

TEST(LiveOutputStream, DeliversInOrderOnItsOwnThread) {
  Seen seen;
  LiveOutputStream stream(seen.Callbacks(), 0);
  stream.Text("a");
  stream.Image("png1");
  stream.Text("b");
  stream.Text("c");
  stream.Finish();
  EXPECT_EQ(seen.Joined(), "a<image:png1>bc");
  for (std::thread::id id : seen.threads) EXPECT_NE(id, std::this_thread::get_id());
}

TEST(LiveOutputStream, NothingIsCalledAfterFinish) {
  Seen seen;
  LiveOutputStream stream(seen.Callbacks(), 0);
  stream.Text("kept");
  stream.Finish();
  stream.Text("late");
  stream.Image("late");
  stream.Flush();  // returns at once: nothing is delivered any more
  stream.Finish();
  EXPECT_EQ(seen.Joined(), "kept");
}

TEST(LiveOutputStream, PassesMaxOutputCharactersThenOneNotice) {
  Seen seen;
  LiveOutputStream stream(seen.Callbacks(), 10);
  stream.Text("12345");
  stream.Text("6789\xc3\xa9xyz");  // é is one character, the 10th
  stream.Text("more");
  stream.Finish();
  const std::string all = seen.Joined();
  ASSERT_EQ(all.rfind("123456789\xc3\xa9", 0), 0u) << all;
  const std::string rest = all.substr(11);
  EXPECT_NE(rest.find("output past 10 characters is not streamed"), std::string::npos) << rest;
  EXPECT_EQ(rest.find("xyz"), std::string::npos);
  EXPECT_EQ(rest.find("more"), std::string::npos);
  EXPECT_EQ(rest.find("not streamed"), rest.rfind("not streamed"));  // once
}

TEST(LiveOutputStream, NeverSplitsACharacterBetweenChunks) {
  Seen seen;
  LiveOutputStream stream(seen.Callbacks(), 0);
  const std::string euro = "\xe2\x82\xac";
  stream.Text("a" + euro.substr(0, 1));
  stream.Flush();
  stream.Text(euro.substr(1, 1));
  stream.Flush();
  stream.Text(euro.substr(2) + "b");
  stream.Finish();
  std::lock_guard<std::mutex> lock(seen.mutex);
  for (const std::string& call : seen.calls) {
    EXPECT_EQ(FindInvalidUtf8(call), std::nullopt) << call;
  }
  std::string all;
  for (const std::string& call : seen.calls) all += call;
  EXPECT_EQ(all, "a" + euro + "b");
}

TEST(LiveOutputStream, FlushWaitsForWhatCameBefore) {
  Seen seen;
  LiveOutputStream stream(seen.Callbacks(), 0);
  stream.Text("before");
  stream.Flush();
  EXPECT_EQ(seen.Joined(), "before");
  stream.Finish();
}

// The callback blocks in its first call until the producer has handed in far
// more than the queue holds: the producer never waits, what did not fit is
// dropped and counted, and the count is said once, in order.
TEST(LiveOutputStream, ABlockedCallbackNeverBlocksTheProducer) {
  std::mutex mutex;
  std::condition_variable changed;
  bool entered = false, released = false;
  std::string delivered;
  OutputCallbacks callbacks;
  callbacks.on_output = [&](std::string_view text) {
    std::unique_lock<std::mutex> lock(mutex);
    entered = true;
    changed.notify_all();
    changed.wait(lock, [&] { return released; });
    delivered.append(text);
  };
  LiveOutputStream stream(callbacks, 0);
  stream.Text("first|");
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return entered; });
  }
  const std::string chunk(1024, 'x');
  const std::size_t chunks = LiveOutputStream::kMaxQueuedBytes / chunk.size() + 100;
  for (std::size_t i = 0; i < chunks; ++i) stream.Text(chunk);  // returns: never waits
  {
    std::lock_guard<std::mutex> lock(mutex);
    released = true;
  }
  changed.notify_all();
  stream.Flush();  // the queue is delivered: "|last" fits, after the notice
  stream.Text("|last");
  stream.Finish();
  const std::size_t kept = LiveOutputStream::kMaxQueuedBytes / chunk.size();
  const std::string notice = "[... " + std::to_string((chunks - kept) * chunk.size()) +
                             " characters dropped here: on_output was slower than the cell "
                             "wrote ...]";
  ASSERT_EQ(delivered.rfind("first|" + std::string(kept * chunk.size(), 'x'), 0), 0u);
  EXPECT_NE(delivered.find(notice), std::string::npos);
  EXPECT_EQ(delivered.substr(delivered.size() - 5), "|last");
  EXPECT_EQ(delivered.find("dropped"), delivered.rfind("dropped"));
}

TEST(LiveOutputStream, ACallbackThatThrowsDoesNotStopDelivery) {
  std::vector<std::string> calls;
  OutputCallbacks callbacks;
  callbacks.on_output = [&](std::string_view text) {
    calls.emplace_back(text);
    throw std::runtime_error("callback failed");
  };
  LiveOutputStream stream(callbacks, 0);
  stream.Text("one");
  stream.Flush();
  stream.Text("two");
  stream.Finish();
  EXPECT_EQ(calls, (std::vector<std::string>{"one", "two"}));
}

TEST(LiveOutputStream, ImagesWithoutOnImageAreIgnored) {
  std::string delivered;
  OutputCallbacks callbacks;
  callbacks.on_output = [&](std::string_view text) { delivered.append(text); };
  LiveOutputStream stream(callbacks, 0);
  EXPECT_FALSE(stream.wants_images());
  stream.Text("a");
  stream.Image("png");
  stream.Text("b");
  stream.Finish();
  EXPECT_EQ(delivered, "ab");
}

}  // namespace
}  // namespace dolsot
