// McpProgress (see mcp_progress.h).
#include "cli/mcp_progress.h"

#include <utility>

namespace dolsot::cli {

McpProgress::McpProgress(Json token, std::function<void(const std::string& line)> write)
    : token_(std::move(token)), write_(std::move(write)) {}

Json McpProgress::TokenOf(const Json& params) {
  if (!params.is_object()) return nullptr;
  auto meta = params.find("_meta");
  if (meta == params.end() || !meta->is_object()) return nullptr;
  auto token = meta->find("progressToken");
  if (token == meta->end()) return nullptr;
  if (token->is_string() || token->is_number_integer()) return *token;
  return nullptr;
}

OutputCallbacks McpProgress::Callbacks() {
  OutputCallbacks callbacks;
  callbacks.on_output = [this](std::string_view text) { Append(text); };
  return callbacks;
}

void McpProgress::Append(std::string_view text) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_ || text.empty()) return;
  output_.Append(text);
  unsent_ = true;
  if (!sender_.joinable()) {
    sender_ = std::thread([this] { SendLoop(); });
  } else {
    changed_.notify_one();
  }
}

void McpProgress::SendLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (!unsent_) {
      changed_.wait(lock);
      continue;
    }
    const auto due = last_sent_ + kInterval;
    if (std::chrono::steady_clock::now() < due) {
      changed_.wait_until(lock, due, [&] { return stopping_; });
      continue;
    }
    Json params = Json::object();
    params["progressToken"] = token_;
    // Increases with every notification: the characters written so far.
    params["progress"] = output_.total_chars();
    params["message"] = output_.Text();
    Json notification = Json::object();
    notification["jsonrpc"] = "2.0";
    notification["method"] = "notifications/progress";
    notification["params"] = std::move(params);
    unsent_ = false;
    last_sent_ = std::chrono::steady_clock::now();
    // Written under mutex_, so Stop returns only after a line in flight
    // went out: nothing follows the result.
    write_(DumpLine(notification));
  }
}

void McpProgress::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  changed_.notify_one();
  if (sender_.joinable()) sender_.join();
}

}  // namespace dolsot::cli
