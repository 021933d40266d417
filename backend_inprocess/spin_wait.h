// Bounded, adaptive spinning before a blocking wait, for the two hand-offs of
// InProcessSession (host -> cell thread, cell thread -> host). Waking a thread
// that sleeps in the kernel costs tens of microseconds on a VM, more than a
// trivial cell; a waiter that spins briefly sees the hand-off in well under a
// microsecond. The budget is learned from how long recent hand-offs actually
// took (the producer stamps the moment it publishes), so a waiter whose
// hand-offs come late (a slow cell, a host that thinks between cells) stops
// spinning, and one whose hand-offs come quickly spins just long enough.
// No spinning off Linux or when the process may use only one CPU.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace dolsot {

using SpinClock = std::chrono::steady_clock;

// Monotonic nanoseconds (SpinClock), for the producer's stamp.
std::int64_t SpinNowNanos();

// True on Linux when the calling thread's affinity mask holds at least two
// CPUs (a spinning waiter on the only CPU just delays its producer).
bool SpinningCanHelp();

// One CPU-friendly pause in a spin loop (PAUSE on x86, YIELD on ARM).
void SpinPause();

// A waiter's spin budget. Learn() and Current() may race between threads
// (relaxed atomics): the budget is a hint, any value in range is safe.
class SpinBudget {
 public:
  // Never spins longer than this per wait.
  static constexpr std::int64_t kCapNanos = 50'000;
  // The least useful budget; a smaller one becomes 0 (no spinning).
  static constexpr std::int64_t kFloorNanos = 2'000;

  // `enabled` false: Current() is always 0.
  explicit SpinBudget(bool enabled = SpinningCanHelp());

  bool enabled() const { return enabled_; }
  std::int64_t CurrentNanos() const;

  // Learns from one hand-off: `needed_nanos` is how long after the wait began
  // the awaited event was published (0 or less: it was ready at once). A
  // hand-off that spinning would have caught raises the budget to a few times
  // its latency at once (capped); one later than the cap halves it.
  void Learn(std::int64_t needed_nanos);

 private:
  bool enabled_;
  std::atomic<std::int64_t> budget_nanos_{0};
};

// Spins while `ready()` is false, at most the budget and never past
// `deadline`. True when `ready()` turned true. `ready` must be safe to call
// without any lock (read atomics).
template <typename Ready>
bool SpinUntil(const SpinBudget& budget, SpinClock::time_point deadline, Ready&& ready) {
  if (ready()) return true;
  const std::int64_t spin = budget.CurrentNanos();
  if (spin <= 0) return false;
  const auto stop = std::min(deadline, SpinClock::now() + std::chrono::nanoseconds(spin));
  for (;;) {
    for (int i = 0; i < 16; ++i) {  // the clock is read once per 16 pauses
      SpinPause();
      if (ready()) return true;
    }
    if (SpinClock::now() >= stop) return ready();
  }
}

// The whole wait: spins (SpinUntil), then blocks on `wake` under `mutex` until
// `ready()` or `deadline` (SpinClock::time_point::max(): no deadline), then
// learns from the producer's stamp in `published_nanos` (SpinNowNanos() when
// it made `ready()` true; read only when ready). The producer sets its state
// and stamp under `mutex` and notifies `wake`. True when ready.
template <typename Ready>
bool SpinThenWait(SpinBudget& budget, std::mutex& mutex, std::condition_variable& wake,
                  SpinClock::time_point deadline, const std::atomic<std::int64_t>& published_nanos,
                  Ready&& ready) {
  const std::int64_t start = budget.enabled() ? SpinNowNanos() : 0;
  bool done = SpinUntil(budget, deadline, ready);
  if (!done) {
    std::unique_lock<std::mutex> lock(mutex);
    if (deadline == SpinClock::time_point::max()) {
      wake.wait(lock, ready);
      done = true;
    } else {
      done = wake.wait_until(lock, deadline, ready);
    }
  }
  if (budget.enabled()) {
    budget.Learn(done ? published_nanos.load(std::memory_order_acquire) - start
                      : SpinBudget::kCapNanos * 2);
  }
  return done;
}

}  // namespace dolsot
