// The host's end of one cell's tool calls (see tool_replies.h).
#include "backend_subprocess/tool_replies.h"

#include "backend_subprocess/protocol.h"

namespace dolsot {

void ToolReplies::Send(std::uint64_t call_id, const ToolReply& reply) {
  std::string payload = protocol::ToolReplyPayload(call_id, reply);
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_ || !socket_) return;
  // A runner that is gone shows on its socket to the thread awaiting the Result.
  (void)protocol::WriteFrame(socket_.get(), protocol::Tag::kToolReply, payload);
}

void ToolReplies::Close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  socket_.Reset();
}

}  // namespace dolsot
