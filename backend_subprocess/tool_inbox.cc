// The host's end of one cell's tool calls (see tool_inbox.h).
#include "backend_subprocess/tool_inbox.h"

#include <sys/eventfd.h>
#include <unistd.h>

namespace dolsot {

ToolInbox::ToolInbox() : wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

void ToolInbox::Post(std::uint64_t call_id, ToolReply reply) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;
  replies_.emplace_back(call_id, std::move(reply));
  if (wake_) {
    std::uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
  }
}

std::vector<std::pair<std::uint64_t, ToolReply>> ToolInbox::Take() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (wake_) {
    std::uint64_t drained;
    (void)!::read(wake_.get(), &drained, sizeof drained);
  }
  return std::exchange(replies_, {});
}

void ToolInbox::Close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  replies_.clear();
}

}  // namespace dolsot
