// SocketSink: a cell's stdout as OUTPUT frames, eager at first, then
// batched.
#include <Python.h>

#include "backend_subprocess/socket_sink.h"

#include "backend_subprocess/fork_guard.h"
#include "backend_subprocess/protocol.h"

namespace dolsot {

void SocketSink::Write(std::string_view text) {
  if (broken_ || fork_guard::InCellChild()) return;  // not the runner: say nothing
  pending_.append(text);
  auto now = std::chrono::steady_clock::now();
  if (live_ || streamed_ + pending_.size() <= kEagerBytes || now - last_flush_ >= kBatchInterval) {
    Flush(now);
  }
}

void SocketSink::Image(std::string_view png) {
  if (!images_ || broken_ || fork_guard::InCellChild()) return;
  Flush(std::chrono::steady_clock::now());  // the text written before it goes first
  if (broken_ || png.size() > protocol::kMaxFrameBytes) return;
  Status s;
  Py_BEGIN_ALLOW_THREADS
  std::lock_guard<std::mutex> writing(write_mutex_);
  s = protocol::WriteFrame(socket_, protocol::Tag::kImage, png);
  Py_END_ALLOW_THREADS
  if (!s.ok()) broken_ = true;
}

void SocketSink::Flush(std::chrono::steady_clock::time_point now) {
  if (pending_.empty()) return;
  Status s;
  Py_BEGIN_ALLOW_THREADS
  // In frames of at most the protocol's cap, each whole on its own: the
  // host keeps what it can use of them and drops the rest as they come.
  std::string_view left = pending_;
  std::lock_guard<std::mutex> writing(write_mutex_);  // a tool call may write too
  while (!left.empty() && s.ok()) {
    std::string_view piece = left.substr(0, protocol::kMaxFrameBytes);
    s = protocol::WriteFrame(socket_, protocol::Tag::kOutput, piece);
    left.remove_prefix(piece.size());
  }
  Py_END_ALLOW_THREADS
  if (!s.ok()) broken_ = true;
  streamed_ += pending_.size();
  pending_.clear();
  last_flush_ = now;
}

}  // namespace dolsot
