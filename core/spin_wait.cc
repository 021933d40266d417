// SpinBudget and the platform pieces of spin_wait.h.
#include "core/spin_wait.h"

#include <algorithm>

#if defined(__linux__)
#include <sched.h>
#include <sys/resource.h>
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

SpinBudget::SpinBudget(bool enabled, Kind kind) : enabled_(enabled), kind_(kind) {}

std::int64_t SpinBudget::CurrentNanos() const {
  return enabled_ ? budget_nanos_.load(std::memory_order_relaxed) : 0;
}

std::int64_t SpinBudget::NextWaitNanos() {
  if (!enabled_) return 0;
  const std::uint32_t backing_off = until_spin_.load(std::memory_order_relaxed);
  if (backing_off > 0) {
    until_spin_.store(backing_off - 1, std::memory_order_relaxed);
    return 0;
  }
  const std::uint32_t left = until_probe_.load(std::memory_order_relaxed);
  if (left <= 1) {
    until_probe_.store(probe_every_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    return 0;
  }
  until_probe_.store(left - 1, std::memory_order_relaxed);
  return budget_nanos_.load(std::memory_order_relaxed);
}

void SpinBudget::Learn(const HandOffSample& sample) {
  if (!enabled_) return;
  const bool missed = sample.spin_tried && !sample.caught;
  if (kind_ == kPeers) {
    if (missed && sample.contended) {
      const std::uint32_t next =
          std::min(kMaxBackOff, std::max(kMinBackOff, 2 * back_off_.load(std::memory_order_relaxed)));
      back_off_.store(next, std::memory_order_relaxed);
      until_spin_.store(next, std::memory_order_relaxed);
    } else if (sample.caught) {
      back_off_.store(0, std::memory_order_relaxed);
    }
  }
  // Spinning is worth it when sleeping waits wake this late (kPeers: always).
  const std::int64_t slow_wake = kind_ == kPeers ? 0 : kSlowWakeNanos;
  std::int64_t wake = wake_nanos_.load(std::memory_order_relaxed);
  if (sample.wake_nanos >= 0) {
    wake += (sample.wake_nanos - wake) / 4;
    wake_nanos_.store(wake, std::memory_order_relaxed);
  }
  const std::int64_t budget = budget_nanos_.load(std::memory_order_relaxed);
  // A probe: a wait that slept without spinning while there was a budget.
  const bool probe = !sample.spin_tried && budget > 0 && sample.wake_nanos >= 0;
  const std::uint32_t every = probe_every_.load(std::memory_order_relaxed);
  if (probe && sample.wake_nanos >= slow_wake) {
    probe_every_.store(std::min(kMaxProbeEvery, every * 2), std::memory_order_relaxed);
  } else if (probe || missed) {
    probe_every_.store(kProbeEvery, std::memory_order_relaxed);
    if (until_probe_.load(std::memory_order_relaxed) > kProbeEvery) {
      until_probe_.store(kProbeEvery, std::memory_order_relaxed);
    }
  }
  std::int64_t next;
  if (wake >= slow_wake && sample.needed_nanos <= kCapNanos && !missed) {
    // Sleeping is slow and a spin catches (or would have caught) this one:
    // aim at 4x its latency, up at once, down slowly.
    const std::int64_t target = std::min(
        kCapNanos, std::max({kFloorNanos, 4 * std::max<std::int64_t>(sample.needed_nanos, 0),
                             wake}));
    next = target >= budget ? target : budget - (budget - target + 3) / 4;
  } else {
    // Sleeping is cheap, the hand-off came later than any budget, or the spin
    // missed (often: its producer waited for the CPU it held). Halve, then stop.
    next = budget / 2;
    if (next < kFloorNanos) next = 0;
  }
  budget_nanos_.store(next, std::memory_order_relaxed);
}

int SpinningPoll::Wait(pollfd* fds, nfds_t count, int timeout_ms) {
  const int spun = Spin(fds, count);
  if (spun != 0) return spun;
  if (timeout_ms == 0) {
    slept_ = -1;
    return 0;
  }
  const int ready = ::poll(fds, count, timeout_ms);
  Woke();
  return ready;
}

void SpinningPoll::Woke() { woke_ = SpinNowNanos(); }

int SpinningPoll::Spin(pollfd* fds, nfds_t count) {
  sample_ = HandOffSample();
  slept_ = -1;
  start_ = SpinNowNanos();
  const std::int64_t spin = budget_.NextWaitNanos();
  sample_.spin_tried = spin > 0;
  if (sample_.spin_tried) {
    // Not SpinUntil: each look is a system call, and 16 of them between two
    // clock reads could pass for a thread descheduled.
    std::int64_t last = start_;
    for (;;) {
      const int ready = ::poll(fds, count, 0);
      if (ready != 0) {
        sample_.caught = true;
        woke_ = SpinNowNanos();
        return ready;
      }
      SpinPause();
      const std::int64_t now = SpinNowNanos();
      // Out of budget, or descheduled (the CPU is contended): sleep.
      if (now - last > 20'000) sample_.contended = true;
      if (now - start_ >= spin || now - last > 20'000) break;
      last = now;
    }
  }
  slept_ = SpinNowNanos();
  return 0;
}

namespace {

// Whether the calling thread was preempted (an involuntary context switch)
// since it last asked; false the first time.
bool PreemptedSinceLastAsked() {
#if defined(__linux__)
  thread_local long last = -1;
  rusage usage;
  if (::getrusage(RUSAGE_THREAD, &usage) != 0) return false;
  const bool preempted = last >= 0 && usage.ru_nivcsw > last;
  last = usage.ru_nivcsw;
  return preempted;
#else
  return false;
#endif
}

}  // namespace

void SpinningPoll::Learn(std::int64_t published_nanos) {
  // Asked only when the spin missed (rare unless something is wrong): a
  // system call.
  if (sample_.spin_tried && !sample_.caught && PreemptedSinceLastAsked()) {
    sample_.contended = true;
  }
  sample_.needed_nanos = published_nanos - start_;
  if (slept_ >= 0) sample_.wake_nanos = woke_ - std::max(slept_, published_nanos);
  budget_.Learn(sample_);
}

}  // namespace dolsot
