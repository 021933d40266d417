// LiveStdout (see live_stdout.h).
#include "cli/live_stdout.h"

#include <algorithm>

#include "core/live_output_stream.h"
#include "core/utf8.h"

namespace dolsot::cli {

// What goes live is queued whole before the stream could drop anything.
static_assert(LiveStdout::kMaxLiveChars * 4 < LiveOutputStream::kMaxQueuedBytes);

LiveStdout::LiveStdout(const CommandContext& context)
    : context_(context),
      active_(!context.json && static_cast<bool>(context.stream_out)),
      budget_chars_(context.stream_max_output == 0
                        ? kMaxLiveChars
                        : std::min(kMaxLiveChars, context.stream_max_output / 2)) {}

OutputCallbacks LiveStdout::Callbacks() {
  OutputCallbacks callbacks;
  if (active_) callbacks.on_output = [this](std::string_view text) { Print(text); };
  return callbacks;
}

void LiveStdout::Print(std::string_view text) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (printed_chars_ >= budget_chars_) return;
  const std::size_t room = budget_chars_ - printed_chars_;
  std::size_t chars = 0;
  std::size_t end = 0;  // bytes of `text` within the room (whole characters)
  for (; end < text.size(); ++end) {
    if (IsUtf8ContinuationByte(static_cast<unsigned char>(text[end]))) continue;
    if (chars == room) break;
    ++chars;
  }
  text = text.substr(0, end);
  if (text.empty()) return;
  printed_.append(text);
  printed_chars_ += chars;
  context_.stream_out(text);
}

std::string LiveStdout::printed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return printed_;
}

}  // namespace dolsot::cli
