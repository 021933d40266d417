// ToolInbox: the host's end of one cell's tool calls. Dispatcher threads post
// replies from anywhere; the thread waiting for the cell's Result wakes on
// wake_fd() and sends them to the runner. Once closed (the cell is over:
// returned, killed or lost) replies are dropped: an abandoned tool's result
// goes nowhere.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/cell_inputs.h"
#include "core/unique_fd.h"

namespace dolsot {

class ToolInbox {
 public:
  ToolInbox();
  ToolInbox(const ToolInbox&) = delete;
  ToolInbox& operator=(const ToolInbox&) = delete;

  // Readable while replies wait (an eventfd); -1 if none could be made (then
  // the waiter polls Take() on its own slice).
  int wake_fd() const { return wake_.get(); }
  // From any thread, once per call.
  void Post(std::uint64_t call_id, ToolReply reply);
  // The replies posted so far, in order; clears the wake.
  std::vector<std::pair<std::uint64_t, ToolReply>> Take();
  // Drops every later reply.
  void Close();

 private:
  UniqueFd wake_;
  std::mutex mutex_;
  bool closed_ = false;
  std::vector<std::pair<std::uint64_t, ToolReply>> replies_;
};

}  // namespace dolsot
