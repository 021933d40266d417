// ForkGuard: a fixed table of descriptors closed in a cell's forked children.
#include "backend_subprocess/fork_guard.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace dolsot::fork_guard {
namespace {

// Slots hold a descriptor or -1. Atomics: the child handler may run on a
// cell's thread while the main thread guards or releases.
std::atomic<int> slots[kSlots] = {-1, -1, -1, -1, -1, -1, -1, -1};
thread_local bool engine_fork = false;
std::atomic<bool> cell_child{false};

void CloseGuardedInChild() {
  if (engine_fork) return;
  cell_child.store(true, std::memory_order_relaxed);
  for (auto& slot : slots) {
    int fd = slot.load(std::memory_order_relaxed);
    if (fd >= 0) {
      ::close(fd);
      slot.store(-1, std::memory_order_relaxed);
    }
  }
}

void InstallOnce() {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(nullptr, nullptr, CloseGuardedInChild); });
}

}  // namespace

bool Guard(int fd) {
  if (fd < 0) return false;
  InstallOnce();
  for (auto& slot : slots) {
    int expected = -1;
    if (slot.compare_exchange_strong(expected, fd)) return true;
  }
  return false;
}

void Release(int fd) {
  if (fd < 0) return;
  for (auto& slot : slots) {
    int expected = fd;
    slot.compare_exchange_strong(expected, -1);
  }
}

bool Guarded(int fd) {
  for (auto& slot : slots) {
    if (fd >= 0 && slot.load() == fd) return true;
  }
  return false;
}

bool InCellChild() { return cell_child.load(std::memory_order_relaxed); }

EngineFork::EngineFork() { engine_fork = true; }
EngineFork::~EngineFork() { engine_fork = false; }

}  // namespace dolsot::fork_guard
