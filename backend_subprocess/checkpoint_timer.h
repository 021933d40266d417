// CheckpointTimer: calls `due(session_id)` on a thread of its own once a
// session's deferred checkpoint falls due (a binding cell's, which waits up
// to the configured delay so the cells after it share one; see
// docs/architecture.md, "Binding cells"). The Repl owns one; the thread
// starts with the first Schedule and is joined by Stop.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace dolsot {

class CheckpointTimer {
 public:
  using Clock = std::chrono::steady_clock;
  using Due = std::function<void(const std::string& session_id)>;

  explicit CheckpointTimer(Due due) : due_(std::move(due)) {}
  ~CheckpointTimer() { Stop(); }
  CheckpointTimer(const CheckpointTimer&) = delete;
  CheckpointTimer& operator=(const CheckpointTimer&) = delete;

  // `due(session_id)` runs at `when` or soon after; a session already
  // waiting keeps the earlier time. Ignored once stopped. Thread-safe.
  void Schedule(const std::string& session_id, Clock::time_point when);
  // Waits for a `due` call in progress; none runs afterwards. Idempotent.
  void Stop();

 private:
  void Loop();

  Due due_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Clock::time_point> waiting_;  // guarded by mutex_
  bool stopping_ = false;                             // guarded by mutex_
  std::thread thread_;                                // started by the first Schedule
};

}  // namespace dolsot
