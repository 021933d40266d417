// LiveStdout: a CLI cell's stdout as it is written (issue #40), printed
// through CommandContext::stream_out, so that the bytes printed in all, this
// and the rest from the Result, are exactly what the CLI printed before it
// streamed: only the head the Result keeps for sure is printed live (the
// first max_output / 2 characters, BoundedText's head; 1 MiB with no cap),
// and PrintResult prints the Result's stdout from where that ends. At most
// kMaxLiveChars go live: at most 1 MiB, far inside the 4 MiB a
// LiveOutputStream queues before it drops (and says so), so what is printed
// live is always the cell's own text, never a drop notice.
//
// With --json-lines (json_lines), the same text goes out as JSON lines,
// {"stdout": TEXT} per chunk, and each figure the cell shows is written to
// its file at once (cli/image_files.h) and named in an {"image": PATH}
// line; the --json document follows as the last line. Its "images" names
// those same files for the figures already shown (ImagePaths), so none is
// written twice.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command_context.h"
#include "core/live_output.h"
#include "core/status.h"

namespace dolsot::cli {

class LiveStdout {
 public:
  static constexpr std::size_t kMaxLiveChars = 1u << 18;

  // `session_id`: the figure files' names (json_lines only).
  LiveStdout(const CommandContext& context, bool json_lines = false,
             std::string session_id = {});
  LiveStdout(const LiveStdout&) = delete;
  LiveStdout& operator=(const LiveStdout&) = delete;

  // Whether the context streams: not with --json unless json_lines, nor
  // without stream_out.
  bool active() const { return active_; }
  // RunOptions::live for the run; valid while this object lives.
  OutputCallbacks Callbacks();
  // What was printed live (call once the run returned).
  std::string printed();
  // The files of the Result's figures (call once the run returned): each
  // figure already written live keeps its file, the others are written now
  // (WriteImageFiles). The figures written live are the Result's images in
  // their order, less any the stream dropped, so they are matched in order
  // by their bytes.
  StatusOr<std::vector<std::string>> ImagePaths(const std::vector<std::string>& images);

 private:
  void Print(std::string_view text);
  void Image(std::string_view png);
  void EmitLocked(const char* key, std::string_view text);

  const CommandContext& context_;
  const bool active_;
  const bool json_lines_;
  const std::string session_id_;
  const std::size_t budget_chars_;
  std::mutex mutex_;
  std::string printed_;
  std::size_t printed_chars_ = 0;
  // json_lines: the figures written live, their bytes and files, in order;
  // the first error writing one (the rest are then left to ImagePaths).
  std::vector<std::string> shown_;
  std::vector<std::string> shown_paths_;
  Status image_error_;
};

}  // namespace dolsot::cli
