// CheckpointTimer (see checkpoint_timer.h).
#include "backend_subprocess/checkpoint_timer.h"

#include <algorithm>
#include <vector>

namespace dolsot {

void CheckpointTimer::Schedule(const std::string& session_id, Clock::time_point when) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (stopping_) return;
  auto [at, added] = waiting_.emplace(session_id, when);
  if (!added && when < at->second) at->second = when;
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  changed_.notify_one();
}

void CheckpointTimer::Stop() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
    waiting_.clear();
    changed_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void CheckpointTimer::Loop() {
  std::unique_lock<std::mutex> guard(mutex_);
  while (!stopping_) {
    if (waiting_.empty()) {
      changed_.wait(guard);
      continue;
    }
    Clock::time_point next = Clock::time_point::max();
    for (const auto& [sid, when] : waiting_) next = std::min(next, when);
    if (Clock::now() < next) {
      changed_.wait_until(guard, next);
      continue;
    }
    std::vector<std::string> due;
    const Clock::time_point now = Clock::now();
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->second <= now) {
        due.push_back(it->first);
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    guard.unlock();
    for (const std::string& sid : due) {
      due_(sid);
      std::lock_guard<std::mutex> check(mutex_);
      if (stopping_) break;
    }
    guard.lock();
  }
}

}  // namespace dolsot
