// SocketSink: a cell's stdout, streamed to the host as it is written, so
// output printed before a kill is not lost.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

#include "embedded/cell_runner.h"

namespace dolsot {

// The first kEagerBytes go out at once; after that, writes are batched (at
// most one OUTPUT frame per kBatchInterval), unless the host streams the
// cell's output to a caller (`live`: every write goes out at once, so it
// arrives as written and before any TOOL_CALL the cell sends after it). With
// `images`, each figure shown goes out as an IMAGE frame. A process a cell
// forked writes nothing (fork_guard.h). Write needs the GIL (it releases it
// to send).
class SocketSink final : public OutputSink {
 public:
  // `write_mutex` serializes frames on `socket` (a tool call may write too).
  SocketSink(int socket, std::mutex& write_mutex, bool live = false, bool images = false)
      : socket_(socket), write_mutex_(write_mutex), live_(live), images_(images) {}
  void Write(std::string_view text) override;
  void Image(std::string_view png) override;

 private:
  static constexpr std::size_t kEagerBytes = 64 * 1024;
  static constexpr std::chrono::milliseconds kBatchInterval{10};
  void Flush(std::chrono::steady_clock::time_point now);
  int socket_;
  std::mutex& write_mutex_;
  const bool live_;
  const bool images_;
  bool broken_ = false;
  std::size_t streamed_ = 0;
  std::string pending_;
  std::chrono::steady_clock::time_point last_flush_{};
};

}  // namespace dolsot
