// spin_wait.h: the adaptive budget (learns, is capped, stops spinning when
// hand-offs come late), the spin that never outlives its budget or deadline,
// the fallback to the condition variable, no spinning on one CPU.
#include "core/spin_wait.h"

#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

namespace dolsot {
namespace {

constexpr std::int64_t kCap = SpinBudget::kCapNanos;

// A wait that slept and woke `wake` after the hand-off `needed` in.
HandOffSample Slept(std::int64_t needed, std::int64_t wake = 40'000) {
  HandOffSample sample;
  sample.needed_nanos = needed;
  sample.wake_nanos = wake;
  return sample;
}

// A wait whose spin saw the hand-off `needed` in.
HandOffSample Caught(std::int64_t needed) {
  HandOffSample sample;
  sample.needed_nanos = needed;
  sample.spin_tried = sample.caught = true;
  return sample;
}

// A budget that has seen slow wake-ups (sleeping costs 40 us) and spins kCap.
void LearnSlowWakeUps(SpinBudget& budget) {
  for (int i = 0; i < 8; ++i) budget.Learn(Slept(kCap));
}

TEST(SpinBudget, StartsWithoutSpinning) {
  SpinBudget budget(true);
  EXPECT_EQ(budget.CurrentNanos(), 0);
  EXPECT_EQ(budget.NextWaitNanos(), 0);
}

TEST(SpinBudget, DisabledNeverSpins) {
  SpinBudget budget(false);
  for (int i = 0; i < 8; ++i) budget.Learn(Slept(1'000));
  EXPECT_FALSE(budget.enabled());
  EXPECT_EQ(budget.CurrentNanos(), 0);
  EXPECT_EQ(budget.NextWaitNanos(), 0);
}

TEST(SpinBudget, SpinsOnlyOnceSleepingIsShownSlow) {
  SpinBudget budget(true);
  for (int i = 0; i < 20; ++i) budget.Learn(Slept(3'000, /*wake=*/2'000));
  EXPECT_EQ(budget.CurrentNanos(), 0) << "quick wake-ups: sleeping is cheap";
  for (int i = 0; i < 8; ++i) budget.Learn(Slept(3'000, /*wake=*/40'000));
  EXPECT_GE(budget.WakeNanos(), SpinBudget::kSlowWakeNanos);
  EXPECT_EQ(budget.CurrentNanos(), std::max<std::int64_t>(12'000, budget.WakeNanos()))
      << "4x the hand-off latency, and at least what a wake-up costs";
}

TEST(SpinBudget, QuickWakeUpsStopTheSpinning) {
  SpinBudget budget(true);
  LearnSlowWakeUps(budget);
  ASSERT_EQ(budget.CurrentNanos(), kCap);
  for (int i = 0; i < 40; ++i) budget.Learn(Slept(3'000, /*wake=*/1'000));
  EXPECT_EQ(budget.CurrentNanos(), 0);
}

TEST(SpinBudget, ReadyAtOnceKeepsTheWakeUpCost) {
  SpinBudget budget(true);
  LearnSlowWakeUps(budget);
  for (int i = 0; i < 100; ++i) budget.Learn(Caught(0));
  EXPECT_EQ(budget.CurrentNanos(), budget.WakeNanos());
  budget.Learn(Caught(-5'000));  // published before the wait began
  EXPECT_EQ(budget.CurrentNanos(), budget.WakeNanos());
}


TEST(SpinBudget, IsCapped) {
  SpinBudget budget(true);
  LearnSlowWakeUps(budget);
  budget.Learn(Caught(kCap / 2));
  EXPECT_EQ(budget.CurrentNanos(), kCap);
  budget.Learn(Caught(kCap));
  EXPECT_EQ(budget.CurrentNanos(), kCap);
}

TEST(SpinBudget, ComesDownSlowlyTowardsQuickHandOffs) {
  SpinBudget budget(true);
  LearnSlowWakeUps(budget);
  std::int64_t previous = budget.CurrentNanos();
  for (int i = 0; i < 50; ++i) {
    budget.Learn(Caught(1'000));
    EXPECT_LE(budget.CurrentNanos(), previous);
    EXPECT_GE(budget.CurrentNanos(), budget.WakeNanos());
    previous = budget.CurrentNanos();
  }
  // Spinning as long as a wake-up costs is never worse than sleeping.
  EXPECT_LT(previous, budget.WakeNanos() + 1'000) << "converges to the wake-up cost";
}

TEST(SpinBudget, LateHandOffsHalveItThenStopSpinning) {
  SpinBudget budget(true);
  LearnSlowWakeUps(budget);
  budget.Learn(Slept(1'000'000'000));  // a cell of one second
  EXPECT_EQ(budget.CurrentNanos(), kCap / 2);
  for (int i = 0; i < 10; ++i) budget.Learn(Slept(kCap + 1));
  EXPECT_EQ(budget.CurrentNanos(), 0);
  budget.Learn(Slept(2'000));  // quick again, sleeping still slow: spinning pays again
  EXPECT_EQ(budget.CurrentNanos(), budget.WakeNanos());
}

TEST(SpinBudget, AMissedSpinHalvesIt) {
  SpinBudget budget(true);
  LearnSlowWakeUps(budget);
  HandOffSample missed = Slept(3'000);
  missed.spin_tried = true;  // spun kCap, yet the hand-off came only after it slept
  budget.Learn(missed);
  EXPECT_EQ(budget.CurrentNanos(), kCap / 2);
}

TEST(SpinBudget, EveryKthWaitIsAProbeThatSleeps) {
  SpinBudget budget(true);
  budget.Learn(Slept(kCap));  // one slow wake-up (not a probe: there was no budget)
  ASSERT_GT(budget.CurrentNanos(), 0);
  EXPECT_EQ(budget.ProbeEvery(), SpinBudget::kProbeEvery);
  int probes = 0;
  for (std::uint32_t i = 0; i < 4 * SpinBudget::kProbeEvery; ++i) {
    if (budget.NextWaitNanos() == 0) ++probes;
  }
  EXPECT_EQ(probes, 4);
}

TEST(SpinBudget, ProbesSpreadOutWhileTheyConfirmSlowWakeUps) {
  SpinBudget budget(true);
  LearnSlowWakeUps(budget);  // the first sets the budget, the other 7 are probes
  EXPECT_EQ(budget.ProbeEvery(), SpinBudget::kMaxProbeEvery);
  int probes = 0;
  for (std::uint32_t i = 0; i < 2 * SpinBudget::kMaxProbeEvery + SpinBudget::kProbeEvery; ++i) {
    if (budget.NextWaitNanos() == 0) ++probes;
  }
  EXPECT_EQ(probes, 3);  // the one already due after kProbeEvery waits, then every kMax
}

TEST(SpinBudget, AFastProbeBringsProbesBack) {
  SpinBudget budget(true);
  LearnSlowWakeUps(budget);
  budget.Learn(Slept(3'000, /*wake=*/2'000));  // a probe that woke fast
  EXPECT_EQ(budget.ProbeEvery(), SpinBudget::kProbeEvery);
  int probes = 0;
  for (std::uint32_t i = 0; i < 4 * SpinBudget::kProbeEvery; ++i) {
    if (budget.NextWaitNanos() == 0) ++probes;
  }
  EXPECT_EQ(probes, 4);
}

TEST(SpinBudget, AMissedSpinBringsProbesBack) {
  SpinBudget budget(true);
  LearnSlowWakeUps(budget);
  HandOffSample missed = Slept(3'000);
  missed.spin_tried = true;
  budget.Learn(missed);
  EXPECT_EQ(budget.ProbeEvery(), SpinBudget::kProbeEvery);
}

// A wait that spun and missed: the hand-off came `needed` in, after it
// slept; `contended`: on a CPU another thread took meanwhile.
HandOffSample Missed(std::int64_t needed, bool contended = true) {
  HandOffSample sample = Slept(needed, /*wake=*/2'000);
  sample.spin_tried = true;
  sample.contended = contended;
  return sample;
}

// How many of the next `waits` waits spin (budget > 0).
int Spinning(SpinBudget& budget, int waits) {
  int spinning = 0;
  for (int i = 0; i < waits; ++i) {
    if (budget.NextWaitNanos() > 0) ++spinning;
  }
  return spinning;
}

TEST(SpinBudget, BetweenProcessesItSpinsEvenWhenWakeUpsAreQuick) {
  SpinBudget peers(true, SpinBudget::kPeers);
  SpinBudget threads(true, SpinBudget::kThreads);
  for (int i = 0; i < 20; ++i) {
    peers.Learn(Slept(3'000, /*wake=*/2'000));
    threads.Learn(Slept(3'000, /*wake=*/2'000));
  }
  EXPECT_EQ(threads.CurrentNanos(), 0) << "threads: quick wake-ups, sleeping is cheap";
  EXPECT_EQ(peers.CurrentNanos(), 12'000) << "processes: 4x the hand-off latency";
  peers.Learn(Slept(kCap + 1));  // a hand-off later than any budget still halves it
  EXPECT_EQ(peers.CurrentNanos(), 6'000);
}

TEST(SpinBudget, BetweenProcessesASpinMissedOnAContendedCpuSleepsTheNextWaitsDoublingUntilACatch) {
  SpinBudget budget(true, SpinBudget::kPeers);
  for (int i = 0; i < 4; ++i) budget.Learn(Slept(3'000, /*wake=*/2'000));
  ASSERT_GT(budget.CurrentNanos(), 0);
  EXPECT_EQ(budget.BackOff(), 0u);
  budget.Learn(Missed(3'000));
  EXPECT_EQ(budget.BackOff(), SpinBudget::kMinBackOff);
  EXPECT_EQ(Spinning(budget, SpinBudget::kMinBackOff), 0) << "the back-off: every wait sleeps";
  for (int i = 0; i < 4; ++i) budget.Learn(Slept(3'000, /*wake=*/2'000));  // budget back up
  EXPECT_GT(budget.NextWaitNanos(), 0) << "then it spins again";
  budget.Learn(Missed(3'000));  // ... and misses again: twice as long
  EXPECT_EQ(budget.BackOff(), 2 * SpinBudget::kMinBackOff);
  EXPECT_EQ(Spinning(budget, 2 * SpinBudget::kMinBackOff), 0);
  for (int i = 0; i < 20; ++i) budget.Learn(Missed(3'000));
  EXPECT_EQ(budget.BackOff(), SpinBudget::kMaxBackOff) << "capped";
  budget.Learn(Caught(3'000));
  EXPECT_EQ(budget.BackOff(), 0u) << "a spin that caught its hand-off ends the back-off";
}

TEST(SpinBudget, BetweenProcessesASpinMissedOnACpuOfItsOwnOnlyHalvesTheBudget) {
  SpinBudget budget(true, SpinBudget::kPeers);
  for (int i = 0; i < 4; ++i) budget.Learn(Slept(3'000, /*wake=*/2'000));
  ASSERT_EQ(budget.CurrentNanos(), 12'000);
  budget.Learn(Missed(60'000, /*contended=*/false));  // the peer was just late
  EXPECT_EQ(budget.BackOff(), 0u);
  EXPECT_EQ(budget.CurrentNanos(), 6'000);
  EXPECT_GT(Spinning(budget, 8), 6) << "no back-off: only the probes sleep";
}

TEST(SpinBudget, BetweenThreadsAMissedSpinDoesNotBackOff) {
  SpinBudget budget(true);
  LearnSlowWakeUps(budget);
  budget.Learn(Missed(3'000));
  EXPECT_EQ(budget.BackOff(), 0u);
}

TEST(SpinUntil, ReturnsAtOnceWhenReady) {
  int calls = 0;
  EXPECT_TRUE(SpinUntil(kCap, SpinClock::time_point::max(), [&] { return ++calls > 0; }));
  EXPECT_EQ(calls, 1);
}

TEST(SpinUntil, WithoutBudgetChecksOnceAndGivesUp) {
  int calls = 0;
  EXPECT_FALSE(SpinUntil(0, SpinClock::time_point::max(), [&] { return ++calls < 0; }));
  EXPECT_EQ(calls, 1);
}

TEST(SpinUntil, GivesUpAfterItsBudgetOrDeadline) {
  int calls = 0;
  EXPECT_FALSE(SpinUntil(kCap, SpinClock::time_point::max(), [&] { return ++calls < 0; }));
  EXPECT_GT(calls, 1);
  calls = 0;
  EXPECT_FALSE(SpinUntil(kCap, SpinClock::now(), [&] { return ++calls < 0; }));
  EXPECT_EQ(calls, 18) << "one check, one round of pauses, then the deadline is seen";
}

TEST(SpinUntil, SeesAValuePublishedByAnotherThread) {
  std::atomic<bool> flag{false};
  std::thread producer([&] { flag.store(true, std::memory_order_release); });
  // Either the spin sees it or the budget ran out first; then it is seen after join.
  bool seen = SpinUntil(kCap, SpinClock::time_point::max(),
                        [&] { return flag.load(std::memory_order_acquire); });
  producer.join();
  EXPECT_TRUE(seen || flag.load());
}

struct Slot {
  std::mutex mutex;
  std::condition_variable wake;
  std::atomic<bool> ready{false};
  std::atomic<std::int64_t> published{0};

  void Publish() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      published.store(SpinNowNanos(), std::memory_order_relaxed);
      ready.store(true, std::memory_order_release);
    }
    wake.notify_all();
  }
  bool Wait(SpinBudget& budget, SpinClock::time_point deadline) {
    bool done = SpinThenWait(budget, mutex, wake, deadline, published,
                             [&] { return ready.load(std::memory_order_acquire); });
    ready.store(false, std::memory_order_relaxed);
    return done;
  }
};

TEST(SpinThenWait, FallsBackToTheConditionVariableAndWakesOnNotify) {
  SpinBudget budget(false);  // never spins: only the notify can end the wait
  Slot slot;
  std::atomic<bool> waiting{false};
  bool done = false;
  std::thread waiter([&] {
    waiting.store(true);
    done = slot.Wait(budget, SpinClock::time_point::max());
  });
  while (!waiting.load()) std::this_thread::yield();
  slot.Publish();
  waiter.join();
  EXPECT_TRUE(done);
}

TEST(SpinThenWait, ReturnsFalseAtTheDeadlineAndLearnsTheMiss) {
  SpinBudget budget(true);
  LearnSlowWakeUps(budget);
  Slot slot;
  EXPECT_FALSE(slot.Wait(budget, SpinClock::now() + std::chrono::milliseconds(1)));
  EXPECT_EQ(budget.CurrentNanos(), kCap / 2);
}

TEST(SpinThenWait, PingPongBetweenTwoThreadsLosesNoHandOff) {
  constexpr int kRounds = 5'000;
  Slot to_b, to_a;
  SpinBudget a_spin, b_spin;  // enabled on two CPUs, as in the pool
  int b_seen = 0;
  std::thread b([&] {
    for (int i = 0; i < kRounds; ++i) {
      ASSERT_TRUE(to_b.Wait(b_spin, SpinClock::time_point::max()));
      ++b_seen;
      to_a.Publish();
    }
  });
  int a_seen = 0;
  for (int i = 0; i < kRounds; ++i) {
    to_b.Publish();
    ASSERT_TRUE(to_a.Wait(a_spin, SpinClock::time_point::max()));
    ++a_seen;
  }
  b.join();
  EXPECT_EQ(a_seen, kRounds);
  EXPECT_EQ(b_seen, kRounds);
  EXPECT_LE(a_spin.CurrentNanos(), kCap);
  EXPECT_LE(b_spin.CurrentNanos(), kCap);
}

// SpinningPoll: what poll() says, whether it spins or sleeps; a spin that
// sees the message teaches the budget a catch, and one that runs out sleeps.
struct Pipe {
  int read_end = -1, write_end = -1;
  Pipe() {
    int p[2];
    EXPECT_EQ(::pipe(p), 0);
    read_end = p[0];
    write_end = p[1];
  }
  ~Pipe() {
    ::close(read_end);
    if (write_end >= 0) ::close(write_end);
  }
};

TEST(SpinningPoll, ReturnsWhatPollSaysSpinningOrNot) {
  for (bool spinning : {false, true}) {
    SpinBudget budget(true);
    if (spinning) LearnSlowWakeUps(budget);
    Pipe pipe;
    pollfd fd{pipe.read_end, POLLIN, 0};
    SpinningPoll wait(budget);
    EXPECT_EQ(wait.Wait(&fd, 1, 0), 0) << "nothing written";
    ASSERT_EQ(::write(pipe.write_end, "x", 1), 1);
    EXPECT_EQ(wait.Wait(&fd, 1, -1), 1);
    EXPECT_TRUE(fd.revents & POLLIN);
    ::close(pipe.write_end);
    pipe.write_end = -1;
    char byte;
    ASSERT_EQ(::read(pipe.read_end, &byte, 1), 1);
    EXPECT_EQ(wait.Wait(&fd, 1, -1), 1) << "a closed peer wakes it too";
    EXPECT_TRUE(fd.revents & POLLHUP);
  }
}

TEST(SpinningPoll, SeesAMessageFromAnotherThreadAndLearnsFromItsStamp) {
  SpinBudget budget(true);
  LearnSlowWakeUps(budget);
  const std::int64_t before = budget.CurrentNanos();
  ASSERT_GT(before, 0);
  Pipe pipe;
  std::atomic<std::int64_t> sent_at{0};
  std::thread writer([&] {
    sent_at.store(SpinNowNanos());
    ASSERT_EQ(::write(pipe.write_end, "x", 1), 1);
  });
  pollfd fd{pipe.read_end, POLLIN, 0};
  SpinningPoll wait(budget);
  EXPECT_EQ(wait.Wait(&fd, 1, -1), 1);
  writer.join();
  wait.Learn(sent_at.load());
  // Caught by the spin or woken from sleep: either way a budget in range.
  EXPECT_GE(budget.CurrentNanos(), 0);
  EXPECT_LE(budget.CurrentNanos(), kCap);
}

TEST(SpinningPoll, AStampLaterThanTheCapStopsTheSpinning) {
  SpinBudget budget(true);
  LearnSlowWakeUps(budget);
  Pipe pipe;
  pollfd fd{pipe.read_end, POLLIN, 0};
  ASSERT_EQ(::write(pipe.write_end, "x", 1), 1);
  for (int i = 0; i < 16 && budget.CurrentNanos() > 0; ++i) {
    SpinningPoll wait(budget);
    ASSERT_EQ(wait.Wait(&fd, 1, -1), 1);
    // The producer sent it long after the wait began (a slow tool, a cell
    // that thinks between calls): spinning would not have caught it.
    wait.Learn(SpinNowNanos() + 10 * kCap);
  }
  EXPECT_EQ(budget.CurrentNanos(), 0);
}

#if defined(__linux__)
TEST(SpinningCanHelp, FollowsTheAffinityMask) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(SpinningCanHelp(), CPU_COUNT(&all) >= 2);
  // On a thread confined to one CPU, nothing spins.
  bool can_help = true, enabled = true;
  std::thread confined([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &all)) {
        CPU_SET(cpu, &one);
        break;
      }
    }
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    can_help = SpinningCanHelp();
    SpinBudget budget;
    for (int i = 0; i < 8; ++i) budget.Learn(Slept(1'000));
    enabled = budget.enabled() || budget.NextWaitNanos() != 0;
  });
  confined.join();
  EXPECT_FALSE(can_help);
  EXPECT_FALSE(enabled);
}
#else
TEST(SpinningCanHelp, NeverOffLinux) { EXPECT_FALSE(SpinningCanHelp()); }
#endif

}  // namespace
}  // namespace dolsot
