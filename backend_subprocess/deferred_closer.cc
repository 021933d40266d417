// Descriptors closed off the critical path (see deferred_closer.h).
#include "backend_subprocess/deferred_closer.h"

#include <utility>

namespace dolsot {

void DeferredCloser::Add(UniqueFd fd) {
  if (!fd) return;
  std::vector<UniqueFd> batch;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    queue_.push_back(std::move(fd));
    if (queue_.size() < batch_) return;
    batch.swap(queue_);
  }
  // Closed here, outside the lock, as `batch` goes out of scope.
}

std::vector<UniqueFd> DeferredCloser::Take() {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<UniqueFd> out;
  out.swap(queue_);
  return out;
}

void DeferredCloser::CloseAll() { Take(); }

std::size_t DeferredCloser::Pending() {
  std::lock_guard<std::mutex> guard(mutex_);
  return queue_.size();
}

}  // namespace dolsot
