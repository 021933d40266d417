// CheckpointTimer (backend_subprocess/checkpoint_timer.h): calls come at
// their time, once per scheduling, the earlier time wins, and Stop ends its
// thread, after which nothing is called.
#include "backend_subprocess/checkpoint_timer.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

namespace dolsot {
namespace {

using Clock = CheckpointTimer::Clock;

struct Calls {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::pair<std::string, Clock::time_point>> seen;

  void Add(const std::string& sid) {
    std::lock_guard<std::mutex> guard(mutex);
    seen.emplace_back(sid, Clock::now());
    changed.notify_all();
  }
  bool WaitFor(std::size_t n) {
    std::unique_lock<std::mutex> guard(mutex);
    return changed.wait_for(guard, std::chrono::seconds(30), [&] { return seen.size() >= n; });
  }
};

int ThreadCount() {
  int n = 0;
  if (DIR* dir = ::opendir("/proc/self/task")) {
    while (dirent* entry = ::readdir(dir)) n += entry->d_name[0] != '.';
    ::closedir(dir);
  }
  return n;
}

TEST(CheckpointTimer, CallsEachSessionOnceAtItsTimeTheEarlierTimeWinning) {
  Calls calls;
  CheckpointTimer timer([&](const std::string& sid) { calls.Add(sid); });
  const auto start = Clock::now();
  timer.Schedule("late", start + std::chrono::milliseconds(200));
  timer.Schedule("soon", start + std::chrono::milliseconds(400));
  timer.Schedule("soon", start + std::chrono::milliseconds(20));   // earlier: kept
  timer.Schedule("late", start + std::chrono::milliseconds(900));  // later: ignored
  ASSERT_TRUE(calls.WaitFor(2));
  std::lock_guard<std::mutex> guard(calls.mutex);
  ASSERT_EQ(calls.seen.size(), 2u);
  EXPECT_EQ(calls.seen[0].first, "soon");
  EXPECT_EQ(calls.seen[1].first, "late");
  EXPECT_GE(calls.seen[0].second, start + std::chrono::milliseconds(20));
  EXPECT_GE(calls.seen[1].second, start + std::chrono::milliseconds(200));
}

TEST(CheckpointTimer, StopEndsTheThreadAndNothingIsCalledAfter) {
  const int before = ThreadCount();
  Calls calls;
  {
    CheckpointTimer idle([&](const std::string& sid) { calls.Add(sid); });
    EXPECT_EQ(ThreadCount(), before) << "no thread until something is scheduled";
  }
  CheckpointTimer timer([&](const std::string& sid) { calls.Add(sid); });
  timer.Schedule("s", Clock::now());
  ASSERT_TRUE(calls.WaitFor(1));
  timer.Schedule("never", Clock::now() + std::chrono::hours(1));
  timer.Stop();  // does not wait the hour
  EXPECT_EQ(ThreadCount(), before);
  timer.Schedule("after", Clock::now());
  timer.Stop();  // idempotent
  std::lock_guard<std::mutex> guard(calls.mutex);
  EXPECT_EQ(calls.seen.size(), 1u);
}

}  // namespace
}  // namespace dolsot
