// LiveOutputStream: one cell's live output on its way to the host's
// callbacks (core/live_output.h). Producers (the cell's thread in-process,
// the thread reading a session process's frames in a Repl) hand it text and
// images; a thread the stream owns calls the callbacks. Needs no CPython.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "core/live_output.h"

namespace dolsot {

// Bounds, as the Result's: at most `max_output` characters (code points; 0:
// no cap) reach on_output, followed by one notice that the rest was cut (the
// Result itself keeps the head and the tail, as always).
//
// A slow callback never blocks the cell: producers only append to a queue
// (consecutive text merges into one chunk, so a slow on_output is called
// less often with more at a time). The queue holds at most kMaxQueuedBytes
// of text and kMaxQueuedImages images of kMaxQueuedImageBytes in all; what arrives while it is full is
// dropped and counted, and the next chunk delivered starts with a notice
// saying how many characters (and figures) were dropped. So memory is
// bounded and the cell runs at its own pace however slow the callback.
//
// Thread safety: Text, Image and Flush may be called from any thread, at
// once; Finish from one thread, once the producers are done (a producer
// that writes later, a cell still running after its timeout, is ignored).
class LiveOutputStream {
 public:
  static constexpr std::size_t kMaxQueuedBytes = 4u << 20;
  static constexpr std::size_t kMaxQueuedImages = 16;
  static constexpr std::size_t kMaxQueuedImageBytes = 32u << 20;
  // While output flows, the callbacks are called at most once per kGather
  // (what comes meanwhile merges); the first chunk after a pause goes at once.
  static constexpr std::chrono::milliseconds kGather{20};

  LiveOutputStream(OutputCallbacks callbacks, std::size_t max_output);
  ~LiveOutputStream();  // Finish()
  LiveOutputStream(const LiveOutputStream&) = delete;
  LiveOutputStream& operator=(const LiveOutputStream&) = delete;

  // A chunk of the cell's output, UTF-8 (a sequence cut at the chunk's end
  // is held back for the next chunk, so a character never splits between
  // two calls). Never waits for the callback.
  void Text(std::string_view utf8);
  // A figure's PNG bytes; ignored when there is no on_image. Never waits.
  void Image(std::string_view png);
  // Waits until everything handed in before the call has gone through the
  // callbacks (a host tool then runs after the output printed before it).
  void Flush();
  // Flush, then stop: no callback is called after it returns, and what is
  // handed in later is dropped. Joins the delivery thread. Idempotent.
  void Finish();

  // For a producer that already takes a lock of its own around each write
  // (in-process: the cell's capture): it keeps the text under that lock and
  // Pokes the stream when its buffer goes from empty to not; the stream
  // calls `pull` (which hands the buffer to Text) before each delivery, in
  // Flush and in Finish, never holding a lock of its own, and never after
  // Finish. Set before the producer starts.
  void SetPull(std::function<void()> pull);
  void Poke();

  bool wants_text() const { return static_cast<bool>(callbacks_.on_output); }
  bool wants_images() const { return static_cast<bool>(callbacks_.on_image); }

 private:
  struct Item {
    bool image = false;
    std::string bytes;
  };
  // Under mutex_: queues one item (text merges into a text item at the
  // back), or counts it dropped when the queue is full.
  void EnqueueLocked(bool image, std::string_view bytes, std::size_t chars);
  void StartOrWakeLocked();
  void Pull();
  void DeliverLoop();

  const OutputCallbacks callbacks_;
  const std::size_t max_output_;

  std::mutex mutex_;
  std::condition_variable wake_;       // the delivery thread: items or stop
  std::condition_variable delivered_;  // Flush: delivered_seq_ moved
  std::deque<Item> items_;
  std::size_t queued_bytes_ = 0;
  std::size_t queued_images_ = 0;
  std::size_t queued_image_bytes_ = 0;
  std::string carry_;  // an incomplete UTF-8 sequence ending the last chunk
  std::size_t passed_chars_ = 0;  // characters let through towards max_output_
  bool cut_ = false;              // max_output_ reached: the notice is queued
  std::size_t dropped_chars_ = 0;   // since the last delivered notice
  std::size_t dropped_images_ = 0;
  std::uint64_t queued_seq_ = 0;     // items (and merges) queued so far
  std::uint64_t delivered_seq_ = 0;  // of those, delivered
  bool stopping_ = false;
  bool finished_ = false;
  bool idle_ = false;  // the delivery thread waits for a first item
  bool poked_ = false;  // the producer's buffer holds text to pull
  int flushing_ = 0;   // Flush calls waiting
  bool thread_started_ = false;  // thread_ was started (with the first item)
  bool thread_done_ = false;     // and has delivered its last item
  std::thread thread_;
  std::mutex finish_mutex_;  // one Finish at a time
  std::mutex pull_mutex_;    // held while pull_ runs; taken before the producer's lock
  std::function<void()> pull_;
};

}  // namespace dolsot
