// Bounded, adaptive spinning before a blocking wait, for the two hand-offs of
// InProcessSession (host -> cell thread, cell thread -> host) and, over
// descriptors (SpinningPoll), the two waits of a Repl's host tool call (the
// session for the reply, the host for the next call). Waking a thread
// that sleeps in the kernel costs tens of microseconds on an idle VM, more
// than a trivial cell; a waiter that spins briefly sees the hand-off in well
// under a microsecond. Each waiter learns whether to spin and for how long:
// only while its sleeping waits wake slowly (a busy machine wakes them in
// microseconds, and there a spinner only steals its producer's CPU), and for
// a few times how long its recent hand-offs took (the producer stamps the
// moment it publishes), so a waiter whose hand-offs come late (a slow cell, a
// host that thinks between cells) stops spinning. No spinning off Linux or
// when the thread that creates the budget may use only one CPU.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include <poll.h>

namespace dolsot {

using SpinClock = std::chrono::steady_clock;

// Monotonic nanoseconds (SpinClock), for the producer's stamp.
std::int64_t SpinNowNanos();

// True on Linux when the calling thread's affinity mask holds at least two
// CPUs (a spinning waiter on the only CPU just delays its producer).
bool SpinningCanHelp();

// One CPU-friendly pause in a spin loop (PAUSE on x86, YIELD on ARM).
void SpinPause();

// What one wait saw, for SpinBudget::Learn.
struct HandOffSample {
  // How long after the wait began the producer published (0 or less: ready
  // at once).
  std::int64_t needed_nanos = 0;
  bool spin_tried = false;  // the wait spun (budget > 0, not a probe)
  bool caught = false;      // ... and saw the hand-off while spinning
  // The wait slept: how long after the publication (or the end of the spin,
  // if later) it woke. -1: it did not sleep.
  std::int64_t wake_nanos = -1;
  // The spin missed, and its CPU is contended: the spin was descheduled, or
  // the thread was preempted (an involuntary context switch) since its last
  // missed spin. What makes a kPeers budget back off.
  bool contended = false;
};

// A waiter's spin budget. Spinning pays only when waking a sleeping thread is
// slow (an idle CPU, a VM: tens of microseconds); on a busy machine a woken
// thread runs within microseconds while a spinning one burns the time slice
// its producer needs. So the budget stays 0 until sleeping waits show slow
// wake-ups, and a wait now and then sleeps (a probe) to keep measuring: every
// kProbeEvery-th at first; while probes keep confirming slow wake-ups the
// interval doubles up to kMaxProbeEvery (each probe costs one slow wake-up,
// tens of microseconds, which at every 32nd cell was ~2 us per cell); a fast
// wake-up or a missed spin brings it back to kProbeEvery.
// With slow wake-ups, the budget follows a few times the hand-off latency,
// but never less than the smoothed wake-up cost (spinning that long is never
// worse than sleeping, and a budget tuned to 4x a 3 us hand-off missed every
// jitter of the other thread: each miss a slow wake-up), capped; a spin that
// misses, or a hand-off later than the cap, halves it.
// Learn() and CurrentNanos() may race between threads (relaxed atomics): the
// budget is a hint, any value in range is safe.
//
// Between two processes (SpinBudget::kPeers: a Repl's host tool calls) a
// sleeping wait costs more than its wake-up: the sleeper's poll and the
// sender's wake-up each take about 1.5 us more than a spin's look, so a
// round trip whose two ends sleep costs ~3 us more even where wake-ups are
// fast (a socket ping-pong between two C processes: 9.2 us sleeping, 6.3 us
// spinning, on the 2-vCPU VM of docs/benchmarks.md). Such a budget spins
// whatever the wake-up cost; what keeps it from burning a CPU the producer
// needs (a machine whose CPUs are taken) is that a spin that misses on a
// contended CPU (HandOffSample::contended) makes the next kMinBackOff waits
// sleep, doubling (up to kMaxBackOff) while the spins after them keep
// missing; a spin that catches ends the back-off. A spin that misses on a
// CPU of its own (the peer was just late: a new process warming up, a pause
// of the peer's) only halves the budget, as between threads.
class SpinBudget {
 public:
  enum Kind {
    kThreads,  // spins only while sleeping waits wake slowly (kSlowWakeNanos)
    kPeers,    // spins whatever the wake-up cost, backing off after misses
  };
  // Never spins longer than this per wait.
  static constexpr std::int64_t kCapNanos = 50'000;
  // The least useful budget; a smaller one becomes 0 (no spinning).
  static constexpr std::int64_t kFloorNanos = 2'000;
  // Spinning is worth it when sleeping waits wake this late (smoothed).
  static constexpr std::int64_t kSlowWakeNanos = 10'000;
  // Every this many waits, one sleeps without spinning.
  static constexpr std::uint32_t kProbeEvery = 32;
  // ... and at most this many while probes keep confirming slow wake-ups.
  static constexpr std::uint32_t kMaxProbeEvery = 1024;
  // kPeers: after a missed spin, this many waits sleep; doubling up to kMaxBackOff.
  static constexpr std::uint32_t kMinBackOff = 4;
  static constexpr std::uint32_t kMaxBackOff = 64;

  // `enabled` false: CurrentNanos() is always 0.
  explicit SpinBudget(bool enabled = SpinningCanHelp(), Kind kind = kThreads);
  explicit SpinBudget(Kind kind) : SpinBudget(SpinningCanHelp(), kind) {}

  bool enabled() const { return enabled_; }
  std::int64_t CurrentNanos() const;
  // The smoothed wake-up latency of sleeping waits.
  std::int64_t WakeNanos() const { return wake_nanos_.load(std::memory_order_relaxed); }
  // How many waits apart the probes are now.
  std::uint32_t ProbeEvery() const { return probe_every_.load(std::memory_order_relaxed); }
  // kPeers: how many waits sleep after the next missed spin (0: none missed
  // since the last catch).
  std::uint32_t BackOff() const { return back_off_.load(std::memory_order_relaxed); }
  // The budget for the next wait (0 for a probe); counts the wait.
  std::int64_t NextWaitNanos();

  void Learn(const HandOffSample& sample);

 private:
  bool enabled_;
  Kind kind_;
  std::atomic<std::int64_t> budget_nanos_{0};
  std::atomic<std::int64_t> wake_nanos_{0};
  std::atomic<std::uint32_t> probe_every_{kProbeEvery};
  std::atomic<std::uint32_t> until_probe_{kProbeEvery};  // waits left before the next probe
  std::atomic<std::uint32_t> back_off_{0};    // kPeers: the current back-off
  std::atomic<std::uint32_t> until_spin_{0};  // kPeers: waits left to sleep before spinning
};

// Spins while `ready()` is false, at most `spin_nanos` and never past
// `deadline`; gives up early when the spinning thread was descheduled (the
// CPU is contended). True when `ready()` turned true. `ready` must be safe to
// call without any lock (read atomics).
template <typename Ready>
bool SpinUntil(std::int64_t spin_nanos, SpinClock::time_point deadline, Ready&& ready) {
  if (ready()) return true;
  if (spin_nanos <= 0) return false;
  auto last = SpinClock::now();
  const auto stop = std::min(deadline, last + std::chrono::nanoseconds(spin_nanos));
  for (;;) {
    for (int i = 0; i < 16; ++i) {  // the clock is read once per 16 pauses
      SpinPause();
      if (ready()) return true;
    }
    const auto now = SpinClock::now();
    if (now >= stop || now - last > std::chrono::microseconds(20)) return ready();
    last = now;
  }
}

// The whole wait: spins (SpinUntil, the budget's NextWaitNanos), then sleeps
// on `wake` under `mutex` until `ready()` or `deadline`
// (SpinClock::time_point::max(): no deadline), then teaches the budget from
// the producer's stamp in `published_nanos` (SpinNowNanos(), stored before it
// made `ready()` true). The producer sets its state and stamp under `mutex`
// and notifies `wake`. True when ready.
template <typename Ready>
bool SpinThenWait(SpinBudget& budget, std::mutex& mutex, std::condition_variable& wake,
                  SpinClock::time_point deadline, const std::atomic<std::int64_t>& published_nanos,
                  Ready&& ready) {
  if (!budget.enabled()) {
    std::unique_lock<std::mutex> lock(mutex);
    if (deadline == SpinClock::time_point::max()) {
      wake.wait(lock, ready);
      return true;
    }
    return wake.wait_until(lock, deadline, ready);
  }
  HandOffSample sample;
  const std::int64_t start = SpinNowNanos();
  const std::int64_t spin = budget.NextWaitNanos();
  sample.spin_tried = spin > 0;
  bool done = SpinUntil(spin, deadline, ready);
  sample.caught = sample.spin_tried && done;
  if (!done) {
    const std::int64_t slept = SpinNowNanos();
    {
      std::unique_lock<std::mutex> lock(mutex);
      if (deadline == SpinClock::time_point::max()) {
        wake.wait(lock, ready);
        done = true;
      } else {
        done = wake.wait_until(lock, deadline, ready);
      }
    }
    if (done) {
      sample.wake_nanos =
          SpinNowNanos() - std::max(slept, published_nanos.load(std::memory_order_acquire));
    }
  }
  sample.needed_nanos =
      done ? published_nanos.load(std::memory_order_acquire) - start : SpinBudget::kCapNanos * 2;
  budget.Learn(sample);
  return done;
}

// A wait for descriptors to become readable that spins first: poll(fds, n, 0)
// for as long as the budget says (SpinUntil), then poll(fds, n, timeout_ms).
// The producer is another process: once the wait has what it waited for, the
// caller passes the producer's stamp (SpinNowNanos() when it sent, carried
// in the message: CLOCK_MONOTONIC is the same in every process) to Learn.
// A wait that ends without a message (a wake-up, a closed peer) teaches
// nothing.
class SpinningPoll {
 public:
  explicit SpinningPoll(SpinBudget& budget) : budget_(budget) {}
  // What poll() returns (errno set when < 0).
  int Wait(pollfd* fds, nfds_t count, int timeout_ms);
  // The spin of Wait alone, for a caller that sleeps its own way (a blocking
  // read of one descriptor costs a system call less than poll, then read):
  // what poll() returned when the spin saw something (> 0, or < 0 with
  // errno set), else 0, and the caller sleeps, then calls Woke() once it has
  // what it waited for, before Learn.
  int Spin(pollfd* fds, nfds_t count);
  void Woke();
  void Learn(std::int64_t published_nanos);

 private:
  SpinBudget& budget_;
  HandOffSample sample_;
  std::int64_t start_ = 0;
  std::int64_t slept_ = -1;  // when the wait went to sleep; -1: it did not
  std::int64_t woke_ = 0;
};

}  // namespace dolsot
