// ForkGuard: descriptors that a process forked by a cell must not keep open.
//
// A session process prepares the sockets of its next replies while it waits
// for a cell (the async checkpoint's channel, the next runner's socket), to
// keep their socketpair() off the cell's critical path. A cell that forks
// without exec (os.fork, multiprocessing's "fork" start method) would then
// hand copies of them to its children; a copy kept open hides the close the
// host waits for (a runner that died, a checkpoint channel left unused).
// Guarded descriptors are closed in the child of every fork but the engine's
// own (made inside an EngineFork scope, which passes descriptors on by
// design), by a pthread_atfork child handler (async-signal-safe: close only).
//
// The same handler marks such a child (InCellChild): a process a cell forked
// runs the rest of the cell, and must then exit instead of going on into the
// engine's loop, where it would answer the host in the runner's place. Its
// copy of the session's socket is closed at the fork, and the number may be
// reused by a file the child opens, so the engine checks the mark before it
// reads or writes that socket.
#pragma once

#include "core/status.h"
#include "core/unique_fd.h"

namespace dolsot::fork_guard {

// Closes `fd` in the children of forks a cell makes from now on. The table
// grows as needed, up to kMaxGuarded descriptors at once (a session process
// guards about five). Beyond that, or when memory runs out, an error: `fd`
// is then NOT guarded, and the caller must not keep it open where a cell
// may fork (GuardedFd::Create closes it).
inline constexpr int kMaxGuarded = 4096;
Status Guard(int fd);
// Stops guarding `fd` (before it is closed or handed to a child on purpose).
void Release(int fd);
// Whether `fd` is guarded (for tests).
bool Guarded(int fd);
// Whether this process was forked by a cell (outside an EngineFork scope).
bool InCellChild();

// While alive, forks from this thread are the engine's: guarded descriptors
// stay open in the child.
class EngineFork {
 public:
  EngineFork();
  ~EngineFork();
  EngineFork(const EngineFork&) = delete;
  EngineFork& operator=(const EngineFork&) = delete;
};

// Owns a descriptor guarded for as long as it holds it.
class GuardedFd {
 public:
  GuardedFd() = default;
  // Guards `fd` and takes it. When it cannot be guarded, `fd` is closed at
  // once (so no cell's fork can inherit it) and the error says why.
  static StatusOr<GuardedFd> Create(UniqueFd fd);
  GuardedFd(GuardedFd&& other) noexcept : fd_(std::move(other.fd_)) {}
  GuardedFd& operator=(GuardedFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::move(other.fd_);
    }
    return *this;
  }
  ~GuardedFd() { Reset(); }

  int get() const { return fd_.get(); }
  explicit operator bool() const { return fd_.valid(); }
  // Stops guarding and hands the descriptor over.
  UniqueFd Take() {
    Release(fd_.get());
    return std::move(fd_);
  }
  void Reset() { (void)Take(); }

 private:
  explicit GuardedFd(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace dolsot::fork_guard
