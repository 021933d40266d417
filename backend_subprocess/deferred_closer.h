// DeferredCloser: descriptors whose closing can wait, kept off a cell's
// critical path.
//
// With rollback on, every cell retires a snapshot process, and the host closes
// that process's socket. Closing a socket cost ~25 µs in a paced cell (caches
// cold), on the thread that was about to hand the Result back. The host now
// only queues it here. The queue is closed by CloseAll, which the async
// checkpoint thread calls after each checkpoint it handles (once a cell in
// the default mode), and otherwise in one go by Add once `batch` descriptors
// wait (the later closes of a batch run warm: a few µs each).
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "core/unique_fd.h"

namespace dolsot {

class DeferredCloser {
 public:
  explicit DeferredCloser(std::size_t batch) : batch_(batch) {}
  ~DeferredCloser() { CloseAll(); }
  DeferredCloser(const DeferredCloser&) = delete;
  DeferredCloser& operator=(const DeferredCloser&) = delete;

  // Queues `fd` (closed now if it completes a batch). Thread-safe.
  void Add(UniqueFd fd);
  // Closes every queued descriptor. Thread-safe.
  void CloseAll();
  // How many wait. Thread-safe.
  std::size_t Pending();

 private:
  std::vector<UniqueFd> Take();  // the queue, emptied

  const std::size_t batch_;
  std::mutex mutex_;
  std::vector<UniqueFd> queue_;
};

}  // namespace dolsot
