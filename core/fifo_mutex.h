// FifoMutex: a mutex that admits waiters in arrival order (a ticket lock), so
// calls on one session are served in the order they arrived.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace dolsot {

class FifoMutex {
 public:
  void lock() {
    std::unique_lock<std::mutex> guard(mutex_);
    std::uint64_t ticket = next_++;
    turn_.wait(guard, [&] { return serving_ == ticket; });
  }
  bool try_lock() {
    std::lock_guard<std::mutex> guard(mutex_);
    if (next_ != serving_) return false;
    ++next_;
    return true;
  }
  void unlock() {
    std::lock_guard<std::mutex> guard(mutex_);
    ++serving_;
    turn_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable turn_;
  std::uint64_t next_ = 0;
  std::uint64_t serving_ = 0;
};

}  // namespace dolsot
