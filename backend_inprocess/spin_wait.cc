// SpinBudget and the platform pieces of spin_wait.h.
#include "backend_inprocess/spin_wait.h"

#if defined(__linux__)
#include <sched.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace dolsot {

std::int64_t SpinNowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             SpinClock::now().time_since_epoch())
      .count();
}

bool SpinningCanHelp() {
#if defined(__linux__)
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0) return false;
  return CPU_COUNT(&cpus) >= 2;
#else
  return false;
#endif
}

void SpinPause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

SpinBudget::SpinBudget(bool enabled) : enabled_(enabled) {}

std::int64_t SpinBudget::CurrentNanos() const {
  return enabled_ ? budget_nanos_.load(std::memory_order_relaxed) : 0;
}

void SpinBudget::Learn(std::int64_t needed_nanos) {
  if (!enabled_) return;
  const std::int64_t budget = budget_nanos_.load(std::memory_order_relaxed);
  std::int64_t next;
  if (needed_nanos <= kCapNanos) {
    // Spinning catches (or would have caught) this one: aim at 4x its latency,
    // up at once, down slowly (one quick hand-off says little).
    const std::int64_t target =
        std::min(kCapNanos, std::max(kFloorNanos, 4 * std::max<std::int64_t>(needed_nanos, 0)));
    next = target >= budget ? target : budget - (budget - target) / 4;
  } else {
    // Later than any budget: spinning only burnt a CPU. Halve, then stop.
    next = budget / 2;
    if (next < kFloorNanos) next = 0;
  }
  budget_nanos_.store(next, std::memory_order_relaxed);
}

}  // namespace dolsot
