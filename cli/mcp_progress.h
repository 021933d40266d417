// McpProgress: `notifications/progress` for one `run` tools/call whose
// request carried a progressToken (issue #40): the cell's output so far,
// sent while it runs, at most every kInterval, bounded.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "cli/json_rpc.h"
#include "core/bounded_text.h"
#include "core/live_output.h"

namespace dolsot::cli {

class McpProgress {
 public:
  static constexpr std::chrono::milliseconds kInterval{250};
  // The message holds at most this many characters of the output so far
  // (its head and its tail, as a Result's stdout).
  static constexpr std::size_t kMaxMessageChars = 4000;

  // `token`: the request's progressToken (a string or an integer); `write`
  // sends one line to the client (the server's one writer).
  McpProgress(Json token, std::function<void(const std::string& line)> write);
  ~McpProgress() { Stop(); }
  McpProgress(const McpProgress&) = delete;
  McpProgress& operator=(const McpProgress&) = delete;

  // The callbacks for RunOptions::live; valid until Stop.
  OutputCallbacks Callbacks();
  // No notification is sent after it returns (call it before the result
  // goes out). Joins the thread that sends them. Idempotent.
  void Stop();

  // A progressToken the spec allows (a string or an integer), else null.
  static Json TokenOf(const Json& params);

 private:
  void Append(std::string_view text);
  void SendLoop();

  const Json token_;
  const std::function<void(const std::string&)> write_;
  std::mutex mutex_;
  std::condition_variable changed_;
  BoundedText output_{kMaxMessageChars};
  bool unsent_ = false;  // output came since the last notification
  bool stopping_ = false;
  std::chrono::steady_clock::time_point last_sent_{};
  std::thread sender_;  // started with the first output
};

}  // namespace dolsot::cli
