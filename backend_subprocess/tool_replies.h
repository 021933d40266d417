// ToolReplies: the host's end of one cell's tool calls. A dispatcher thread
// sends its reply (TOOL_REPLY) to the runner itself, from wherever the tool
// ran, so an answer costs no hop through the thread waiting for the Result.
// Once closed (the cell is over: returned, killed or lost) replies are
// dropped: an abandoned tool's result goes nowhere, and nothing but the
// session's own host thread writes on that socket again.
#pragma once

#include <cstdint>
#include <mutex>

#include "core/cell_inputs.h"
#include "core/unique_fd.h"

namespace dolsot {

class ToolReplies {
 public:
  // `socket`: a duplicate of the host's end of the runner's socket, so a
  // reply never lands on a descriptor number reused meanwhile.
  explicit ToolReplies(UniqueFd socket) : socket_(std::move(socket)) {}
  ToolReplies(const ToolReplies&) = delete;
  ToolReplies& operator=(const ToolReplies&) = delete;

  // From any thread, once per call; dropped after Close().
  void Send(std::uint64_t call_id, const ToolReply& reply);
  // Waits for a reply being written, then drops every later one.
  void Close();

 private:
  std::mutex mutex_;
  bool closed_ = false;  // guarded by mutex_
  UniqueFd socket_;      // guarded by mutex_
};

}  // namespace dolsot
