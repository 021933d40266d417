// The host's end of a cell's tool socket (see tool_socket.h).
#include "backend_subprocess/tool_socket.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "backend_subprocess/protocol.h"
#include "core/spin_wait.h"

namespace dolsot {
namespace {

// One budget for every tool socket of the host: how soon a cell's next call
// follows a reply is the same kind of gap from one cell to the next.
SpinBudget& CallBudget() {
  static SpinBudget budget(SpinBudget::kPeers);
  return budget;
}

}  // namespace

bool IsToolSocket(int fd) {
  int domain = 0, type = 0;
  socklen_t length = sizeof domain;
  if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &length) != 0 || domain != AF_UNIX) {
    return false;
  }
  length = sizeof type;
  return ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0 && type == SOCK_STREAM;
}

std::optional<ToolCall> ToolSocketHost::Receive() {
  if (!socket_) return std::nullopt;
  SpinningPoll wait(CallBudget());
  const bool waited = !reader_.pending();  // else the call came with the last one
  bool slept = false;
  if (waited) {
    pollfd p{socket_.get(), POLLIN, 0};
    const int ready = wait.Spin(&p, 1);
    if (ready < 0 && errno != EINTR) return std::nullopt;
    // Not seen while spinning: sleep in the read itself (poll, then recv,
    // costs a system call more). Shutting the socket down ends it.
    slept = ready <= 0;
  }
  auto frame = reader_.Read(socket_.get());
  if (slept) wait.Woke();
  if (!frame.ok() || frame->tag != protocol::Tag::kToolCall) return std::nullopt;
  auto message = protocol::ReadToolCall(frame->payload);
  if (!message.ok()) return std::nullopt;
  if (waited) wait.Learn(message->sent_at);
  call_id_ = message->id;
  answered_ = false;
  return std::move(message->call);
}

bool ToolSocketHost::Reply(const ToolReply& reply) {
  if (answered_ || !socket_) return false;
  answered_ = true;
  return protocol::WriteFrame(socket_.get(), protocol::Tag::kToolReply,
                              protocol::ToolReplyPayload(call_id_, reply))
      .ok();
}

}  // namespace dolsot
