// SpareSession's first delay: a worker's first spare waits `first_delay`
// before it is made (the worker shares its pages ahead meanwhile), but a
// new session that asks for it (Take) has it made at once, and Stop ends the
// wait. The maker here makes nothing (it counts its calls and fails, so
// Take returns no spare): what is asserted is when it is called.
#include "backend_subprocess/spare_session.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>

namespace dolsot {
namespace {

using namespace std::chrono_literals;

// A worker SpareSession only compares and passes on, never uses: a handle
// that owns an int and points at no real WorkerProcess.
std::shared_ptr<WorkerProcess> StandInWorker() {
  auto owner = std::make_shared<int>(0);
  return std::shared_ptr<WorkerProcess>(owner, reinterpret_cast<WorkerProcess*>(owner.get()));
}

SpareSession::Maker CountingMaker(std::atomic<int>* calls) {
  return [calls](const std::shared_ptr<WorkerProcess>&) -> StatusOr<SpareSession::Made> {
    ++*calls;
    return Status(ErrorCode::kUnavailable, "no session in this test");
  };
}

TEST(SpareSessionTest, ANewSessionHasTheFirstSpareMadeAtOnceNotAfterTheDelay) {
  std::atomic<int> calls{0};
  SpareSession spares(CountingMaker(&calls), std::chrono::hours(1));
  auto worker = StandInWorker();
  spares.Want(worker);
  // Within a minute: had the delay not been cut, the maker would not run
  // for an hour and Take would give up at this deadline.
  EXPECT_EQ(spares.Take(worker.get(), protocol::Clock::now() + 60s), nullptr);
  EXPECT_EQ(calls.load(), 1);
  spares.Stop();
}

TEST(SpareSessionTest, StopEndsTheFirstSparesWait) {
  std::atomic<int> calls{0};
  auto worker = StandInWorker();
  {
    SpareSession spares(CountingMaker(&calls), std::chrono::hours(1));
    spares.Want(worker);
    spares.Stop();  // returns: the wait ends (the test would hang otherwise)
  }
  EXPECT_EQ(calls.load(), 0);
}

TEST(SpareSessionTest, WithoutADelayTheSpareIsMadeWhenWanted) {
  std::atomic<int> calls{0};
  SpareSession spares(CountingMaker(&calls));
  auto worker = StandInWorker();
  spares.Want(worker);
  EXPECT_EQ(spares.Take(worker.get(), protocol::Clock::now() + 60s), nullptr);
  EXPECT_EQ(calls.load(), 1);
}

}  // namespace
}  // namespace dolsot
