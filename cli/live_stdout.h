// LiveStdout: a CLI cell's stdout as it is written (issue #40), printed
// through CommandContext::stream_out, so that the bytes printed in all, this
// and the rest from the Result, are exactly what the CLI printed before it
// streamed: only the head the Result keeps for sure is printed live (the
// first max_output / 2 characters, BoundedText's head; 1 MiB with no cap),
// and PrintResult prints the Result's stdout from where that ends. At most
// kMaxLiveChars go live: at most 1 MiB, far inside the 4 MiB a
// LiveOutputStream queues before it drops (and says so), so what is printed
// live is always the cell's own text, never a drop notice.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

#include "cli/command_context.h"
#include "core/live_output.h"

namespace dolsot::cli {

class LiveStdout {
 public:
  static constexpr std::size_t kMaxLiveChars = 1u << 18;

  explicit LiveStdout(const CommandContext& context);
  LiveStdout(const LiveStdout&) = delete;
  LiveStdout& operator=(const LiveStdout&) = delete;

  // Whether the context streams (not with --json, nor without stream_out).
  bool active() const { return active_; }
  // RunOptions::live for the run; valid while this object lives.
  OutputCallbacks Callbacks();
  // What was printed live (call once the run returned).
  std::string printed();

 private:
  void Print(std::string_view text);

  const CommandContext& context_;
  const bool active_;
  const std::size_t budget_chars_;
  std::mutex mutex_;
  std::string printed_;
  std::size_t printed_chars_ = 0;
};

}  // namespace dolsot::cli
