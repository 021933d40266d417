// SocketSink: a cell's stdout as OUTPUT frames, eager at first, then
// batched; for a live cell, a thread sends a batch the cell leaves waiting.
#include <Python.h>

#include "backend_subprocess/socket_sink.h"

#include "backend_subprocess/fork_guard.h"
#include "backend_subprocess/protocol.h"

namespace dolsot {

using SteadyClock = std::chrono::steady_clock;

void SocketSink::Write(std::string_view text) {
  if (fork_guard::InCellChild()) return;  // not the runner: say nothing
  bool send_now = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_ || stopping_) return;
    pending_.append(text);
    const auto now = SteadyClock::now();
    send_now = streamed_ + pending_.size() <= kEagerBytes || now - last_flush_ >= kBatchInterval ||
               pending_.size() > kMaxWaitingBytes;
    if (!send_now && live_) {
      if (!flusher_.joinable()) {
        flusher_ = std::thread([this] { FlushLoop(); });
      } else if (flusher_idle_) {  // else it sends this with the batch when due
        changed_.notify_one();
      }
    }
  }
  if (send_now) {
    Py_BEGIN_ALLOW_THREADS
    SendWithoutGil();
    Py_END_ALLOW_THREADS
  }
}

void SocketSink::SendWithoutGil() {
  std::lock_guard<std::mutex> writing(write_mutex_);  // a tool call may write too
  SendWaiting();
}

void SocketSink::SendWaiting() {
  std::string text;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_ || pending_.empty()) return;
    text.swap(pending_);
    streamed_ += text.size();
    last_flush_ = SteadyClock::now();
  }
  // In frames of at most the protocol's cap, each whole on its own: the
  // host keeps what it can use of them and drops the rest as they come.
  Status s;
  std::string_view left = text;
  while (!left.empty() && s.ok()) {
    std::string_view piece = left.substr(0, protocol::kMaxFrameBytes);
    s = protocol::WriteFrame(socket_, protocol::Tag::kOutput, piece);
    left.remove_prefix(piece.size());
  }
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(mutex_);
    broken_ = true;
  }
}

void SocketSink::FlushLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (pending_.empty()) {
      flusher_idle_ = true;
      changed_.wait(lock);
      flusher_idle_ = false;
      continue;
    }
    const auto due = last_flush_ + kBatchInterval;
    if (SteadyClock::now() < due) {
      changed_.wait_until(lock, due);
      continue;
    }
    lock.unlock();
    SendWithoutGil();
    lock.lock();
  }
}

void SocketSink::Image(std::string_view png) {
  if (!images_ || fork_guard::InCellChild()) return;
  Status s;
  Py_BEGIN_ALLOW_THREADS
  std::lock_guard<std::mutex> writing(write_mutex_);
  SendWaiting();  // the text written before it goes first
  bool broken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    broken = broken_;
  }
  if (!broken && png.size() <= protocol::kMaxFrameBytes) {
    s = protocol::WriteFrame(socket_, protocol::Tag::kImage, png);
  }
  Py_END_ALLOW_THREADS
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(mutex_);
    broken_ = true;
  }
}

void SocketSink::Finish() {
  if (fork_guard::InCellChild()) return;  // no thread of ours was copied
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  changed_.notify_one();
  if (flusher_.joinable()) flusher_.join();
  if (!live_) return;  // what waits is in the Result
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pending_.empty()) return;
  }
  // The last batch: the caller sees all of it before the Result.
  if (PyGILState_Check()) {
    Py_BEGIN_ALLOW_THREADS
    SendWithoutGil();
    Py_END_ALLOW_THREADS
  } else {
    SendWithoutGil();
  }
}

}  // namespace dolsot
