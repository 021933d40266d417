// The shared ring of exit records (see exit_records.h).
#include "backend_subprocess/exit_records.h"

#include <sys/mman.h>

#include <atomic>
#include <new>
#include <cstdint>

namespace dolsot::exit_records {
namespace {

constexpr std::size_t kSlots = 256;

struct Slot {
  std::atomic<std::uint64_t> sequence{0};  // 0: never written; n + 1: the n-th record
  std::atomic<pid_t> pid{0};
  std::atomic<int> status{0};
};

struct Ring {
  std::atomic<std::uint64_t> next{0};
  Slot slots[kSlots];
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "a shared ring needs lock-free atomics");

Ring g_private;             // until Share(), or when it failed
Ring* g_ring = &g_private;  // the one in use

}  // namespace

void Share() {
  if (g_ring != &g_private) return;
  void* memory = ::mmap(nullptr, sizeof(Ring), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return;
  g_ring = new (memory) Ring();
}

void Detach() {
  if (g_ring == &g_private) return;
  ::munmap(g_ring, sizeof(Ring));
  g_ring = &g_private;
}

void Record(pid_t pid, int status) {
  Ring& ring = *g_ring;
  std::uint64_t n = ring.next.fetch_add(1, std::memory_order_relaxed);
  Slot& slot = ring.slots[n % kSlots];
  slot.sequence.store(0, std::memory_order_relaxed);  // being written
  std::atomic_thread_fence(std::memory_order_release);
  slot.pid.store(pid, std::memory_order_relaxed);
  slot.status.store(status, std::memory_order_relaxed);
  slot.sequence.store(n + 1, std::memory_order_release);
}

std::optional<int> Find(pid_t pid) {
  const Ring& ring = *g_ring;
  std::uint64_t end = ring.next.load(std::memory_order_acquire);
  std::uint64_t first = end > kSlots ? end - kSlots : 0;
  for (std::uint64_t n = end; n > first; --n) {
    const Slot& slot = ring.slots[(n - 1) % kSlots];
    if (slot.sequence.load(std::memory_order_acquire) != n) continue;
    pid_t recorded = slot.pid.load(std::memory_order_relaxed);
    int status = slot.status.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.sequence.load(std::memory_order_relaxed) != n) continue;  // rewritten meanwhile
    if (recorded == pid) return status;
  }
  return std::nullopt;
}

}  // namespace dolsot::exit_records
