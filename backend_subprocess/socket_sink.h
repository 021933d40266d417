// SocketSink: a cell's stdout, streamed to the host as it is written, so
// output printed before a kill is not lost.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "embedded/cell_runner.h"

namespace dolsot {

// The first kEagerBytes go out at once; after that, writes are batched (at
// most one OUTPUT frame per kBatchInterval). Unless the host streams the
// cell's output to a caller (`live`), a batch waits for the cell's next
// write; a live cell's sink starts a thread of its own with its first batch,
// which sends what waits once kBatchInterval has passed, so a chunk reaches
// the host within about kBatchInterval however long the cell is silent after
// it. With `images`, each figure shown goes out as an IMAGE frame. Output
// waiting goes out before any other frame of the cell (SendWaiting, called
// by the tool channel before a call and here before an IMAGE), so the host
// sees them in the order the cell made them. A process a cell forked writes
// nothing (fork_guard.h). Write needs the GIL (it releases it to send).
class SocketSink final : public OutputSink {
 public:
  // `write_mutex` serializes frames on `socket` (a tool call may write too).
  SocketSink(int socket, std::mutex& write_mutex, bool live = false, bool images = false)
      : socket_(socket), write_mutex_(write_mutex), live_(live), images_(images) {}
  ~SocketSink() override { Finish(); }
  SocketSink(const SocketSink&) = delete;
  SocketSink& operator=(const SocketSink&) = delete;

  void Write(std::string_view text) override;
  void Image(std::string_view png) override;
  // Sends the output waiting, with write_mutex held by the caller.
  void SendWaiting();
  // Sends what waits and joins the sink's thread: before the Result goes
  // out (and before the runner forks its snapshot). Idempotent.
  void Finish();

 private:
  static constexpr std::size_t kEagerBytes = 64 * 1024;
  static constexpr std::chrono::milliseconds kBatchInterval{10};
  // Past this much waiting, the cell's thread sends it itself.
  static constexpr std::size_t kMaxWaitingBytes = 1 << 20;
  // Takes the GIL-free path: write_mutex_ then the waiting text.
  void SendWithoutGil();
  void FlushLoop();

  int socket_;
  std::mutex& write_mutex_;
  const bool live_;
  const bool images_;
  // Guards the text waiting and the state below; never held while writing.
  std::mutex mutex_;
  std::condition_variable changed_;
  bool broken_ = false;
  bool stopping_ = false;
  bool flusher_idle_ = false;  // the flusher waits for text (not for a batch's time)
  std::size_t streamed_ = 0;
  std::string pending_;
  std::chrono::steady_clock::time_point last_flush_{};
  std::thread flusher_;  // live only, started with the first batch
};

}  // namespace dolsot
