// ForkGuard: a growable table of descriptors closed in a cell's forked
// children.
#include "backend_subprocess/fork_guard.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <new>

namespace dolsot::fork_guard {
namespace {

// Slots hold a descriptor or -1, in blocks. Atomics: the child handler may
// run on a cell's thread while the main thread guards or releases. A block is
// filled with -1 before it is published and never freed, so the handler (which
// may run at any moment, and may only do async-signal-safe things) reads whole
// blocks or none, and never allocates.
constexpr int kBlockSlots = 64;
constexpr int kMaxBlocks = kMaxGuarded / kBlockSlots;
static_assert(kMaxBlocks * kBlockSlots == kMaxGuarded);

struct Block {
  Block() {
    for (auto& slot : slots) slot.store(-1, std::memory_order_relaxed);
  }
  std::atomic<int> slots[kBlockSlots];
};

Block first_block;  // enough for any session process: no allocation at all
std::atomic<Block*> more_blocks[kMaxBlocks - 1] = {};
thread_local bool engine_fork = false;
std::atomic<bool> cell_child{false};

// Block `i`, or nullptr when it does not exist yet.
Block* BlockAt(int i) {
  return i == 0 ? &first_block : more_blocks[i - 1].load(std::memory_order_acquire);
}

// Block `i`, allocated and published if need be; nullptr when out of memory.
Block* GrowTo(int i) {
  if (Block* block = BlockAt(i)) return block;
  Block* fresh = new (std::nothrow) Block();
  if (fresh == nullptr) return nullptr;
  Block* expected = nullptr;
  if (more_blocks[i - 1].compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
    return fresh;
  }
  delete fresh;  // another thread published one first
  return expected;
}

void CloseGuardedInChild() {
  if (engine_fork) return;
  cell_child.store(true, std::memory_order_relaxed);
  for (int i = 0; i < kMaxBlocks; ++i) {
    Block* block = BlockAt(i);
    if (block == nullptr) break;  // blocks are published in order
    for (auto& slot : block->slots) {
      int fd = slot.load(std::memory_order_relaxed);
      if (fd >= 0) {
        ::close(fd);
        slot.store(-1, std::memory_order_relaxed);
      }
    }
  }
}

// Whether the child handler is installed (pthread_atfork can fail).
bool InstallOnce() {
  static const bool installed =
      ::pthread_atfork(nullptr, nullptr, CloseGuardedInChild) == 0;
  return installed;
}

}  // namespace

Status Guard(int fd) {
  if (fd < 0) return InvalidArgument("fork guard: no descriptor to guard");
  if (!InstallOnce()) {
    return InternalError("fork guard: pthread_atfork failed, so no descriptor can be guarded");
  }
  for (int i = 0; i < kMaxBlocks; ++i) {
    Block* block = GrowTo(i);
    if (block == nullptr) {
      return Status(ErrorCode::kIo, "fork guard: out of memory guarding descriptor " +
                                        std::to_string(fd));
    }
    for (auto& slot : block->slots) {
      int expected = -1;
      if (slot.compare_exchange_strong(expected, fd)) return Status::Ok();
    }
  }
  return Status(ErrorCode::kIo, "fork guard: cannot guard descriptor " + std::to_string(fd) +
                                    ": " + std::to_string(kMaxGuarded) +
                                    " are guarded already");
}

void Release(int fd) {
  if (fd < 0) return;
  for (int i = 0; i < kMaxBlocks; ++i) {
    Block* block = BlockAt(i);
    if (block == nullptr) return;
    for (auto& slot : block->slots) {
      int expected = fd;
      slot.compare_exchange_strong(expected, -1);
    }
  }
}

bool Guarded(int fd) {
  if (fd < 0) return false;
  for (int i = 0; i < kMaxBlocks; ++i) {
    Block* block = BlockAt(i);
    if (block == nullptr) return false;
    for (auto& slot : block->slots) {
      if (slot.load() == fd) return true;
    }
  }
  return false;
}

bool InCellChild() { return cell_child.load(std::memory_order_relaxed); }

StatusOr<GuardedFd> GuardedFd::Create(UniqueFd fd) {
  DOLSOT_RETURN_IF_ERROR(Guard(fd.get()));  // on failure `fd` closes here
  return GuardedFd(std::move(fd));
}

EngineFork::EngineFork() { engine_fork = true; }
EngineFork::~EngineFork() { engine_fork = false; }

}  // namespace dolsot::fork_guard
