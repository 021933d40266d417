// LiveStdout (see live_stdout.h).
#include "cli/live_stdout.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli/image_files.h"
#include "core/live_output_stream.h"
#include "core/utf8.h"

namespace dolsot::cli {

// What goes live is queued whole before the stream could drop anything.
static_assert(LiveStdout::kMaxLiveChars * 4 < LiveOutputStream::kMaxQueuedBytes);

LiveStdout::LiveStdout(const CommandContext& context, bool json_lines, std::string session_id)
    : context_(context),
      active_((!context.json || json_lines) && static_cast<bool>(context.stream_out)),
      json_lines_(json_lines),
      session_id_(std::move(session_id)),
      budget_chars_(context.stream_max_output == 0
                        ? kMaxLiveChars
                        : std::min(kMaxLiveChars, context.stream_max_output / 2)) {}

OutputCallbacks LiveStdout::Callbacks() {
  OutputCallbacks callbacks;
  if (!active_) return callbacks;
  callbacks.on_output = [this](std::string_view text) { Print(text); };
  if (json_lines_) callbacks.on_image = [this](std::string_view png) { Image(png); };
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
  if (json_lines_) {
    EmitLocked("stdout", text);
  } else {
    context_.stream_out(text);
  }
}

void LiveStdout::Image(std::string_view png) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!image_error_.ok()) return;  // ImagePaths writes the rest (and says why)
  auto path = WriteImageFiles(context_.image_directory, session_id_, {std::string(png)},
                              context_.image_base_fd);
  if (!path.ok()) {
    image_error_ = path.status();
    return;
  }
  shown_.emplace_back(png);
  shown_paths_.push_back(path->front());
  EmitLocked("image", path->front());
}

void LiveStdout::EmitLocked(const char* key, std::string_view text) {
  nlohmann::ordered_json line = nlohmann::ordered_json::object();
  line[key] = std::string(text);
  // One line: strings are escaped; bytes that are not UTF-8 become U+FFFD,
  // as in the document (cli/json_writer.h).
  context_.stream_out(
      line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
}

std::string LiveStdout::printed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return printed_;
}

StatusOr<std::vector<std::string>> LiveStdout::ImagePaths(const std::vector<std::string>& images) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shown_.empty()) {
    return WriteImageFiles(context_.image_directory, session_id_, images, context_.image_base_fd);
  }
  std::vector<std::string> paths;
  std::size_t next_shown = 0;
  for (const std::string& png : images) {
    if (next_shown < shown_.size() && shown_[next_shown] == png) {
      paths.push_back(shown_paths_[next_shown++]);
      continue;
    }
    auto written = WriteImageFiles(context_.image_directory, session_id_, {png},
                                   context_.image_base_fd);
    if (!written.ok()) return written.status();
    paths.push_back(written->front());
  }
  return paths;
}

}  // namespace dolsot::cli
