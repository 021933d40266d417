// The host's ends of a cell's tool pipes (see tool_pipes.h).
#include "backend_subprocess/tool_pipes.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "backend_subprocess/protocol.h"
#include "core/spin_wait.h"

namespace dolsot {
namespace {

// One budget for every tool pipe of the host: how soon a cell's next call
// follows a reply is the same kind of gap from one cell to the next.
SpinBudget& CallBudget() {
  static SpinBudget budget(SpinBudget::kPeers);
  return budget;
}

// `fd`, checked to be a pipe open for `mode` (O_RDONLY or O_WRONLY), as a
// non-blocking description of the host's own.
StatusOr<UniqueFd> OwnEnd(UniqueFd fd, int mode, const char* what) {
  struct stat info {};
  if (!fd || ::fstat(fd.get(), &info) != 0 || !S_ISFIFO(info.st_mode)) {
    return Status(ErrorCode::kInvalidArgument, std::string(what) + " is not a pipe");
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) != mode) {
    return Status(ErrorCode::kInvalidArgument,
                  std::string(what) + " is not open for " +
                      (mode == O_RDONLY ? "reading" : "writing") + " only");
  }
  // A new open file description: its O_NONBLOCK is the host's alone (the
  // cell may share the one it sent).
  const std::string path = "/proc/self/fd/" + std::to_string(fd.get());
  UniqueFd own(::open(path.c_str(), mode | O_NONBLOCK | O_CLOEXEC));
  struct stat reopened {};
  if (own && ::fstat(own.get(), &reopened) == 0 && reopened.st_ino == info.st_ino &&
      reopened.st_dev == info.st_dev) {
    return own;
  }
  // No /proc: the one it sent, non-blocking (a cell that clears that makes
  // the host's waits on it bounded by its own end, see Receive and Reply).
  if (::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return Status(ErrorCode::kIo, std::string("could not make ") + what + " non-blocking");
  }
  return fd;
}

}  // namespace

StatusOr<HostToolPipes> AcceptToolPipes(UniqueFd calls, UniqueFd replies) {
  auto read_end = OwnEnd(std::move(calls), O_RDONLY, "the call pipe");
  if (!read_end.ok()) return read_end.status();
  auto write_end = OwnEnd(std::move(replies), O_WRONLY, "the reply pipe");
  if (!write_end.ok()) return write_end.status();
  return HostToolPipes{std::move(read_end).value(), std::move(write_end).value()};
}

std::optional<ToolCall> ToolPipesHost::Receive() {
  if (ended_ || !pipes_.calls || !stop_) return std::nullopt;
  const bool waited = !reader_.pending();  // else the call came with the last one
  SpinningPoll wait(CallBudget());
  if (waited) {
    pollfd fds[2] = {{pipes_.calls.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    int ready;
    do {
      ready = wait.Wait(fds, 2, -1);
    } while (ready < 0 && errno == EINTR);
    if (ready < 0 || fds[1].revents != 0) {
      ended_ = true;
      return std::nullopt;
    }
  }
  // The rest of a frame is waited for only until the stop: a cell that
  // writes half a frame holds nothing of the host's past its end.
  auto frame = reader_.Read(pipes_.calls.get(), stop_.get());
  if (!frame.ok() || frame->tag != protocol::Tag::kToolCall) {
    ended_ = true;
    return std::nullopt;
  }
  auto message = protocol::ReadToolCall(frame->payload);
  if (!message.ok()) {
    ended_ = true;
    return std::nullopt;
  }
  if (waited) wait.Learn(message->sent_at);
  call_id_ = message->id;
  answered_ = false;
  return std::move(message->call);
}

bool ToolPipesHost::Reply(const ToolReply& reply) {
  if (answered_ || ended_ || !pipes_.replies) return false;
  answered_ = true;
  // Non-blocking: a cell that never reads its replies fills the pipe, and
  // the write waits only until the stop.
  const bool sent = protocol::WritePipeFrame(pipes_.replies.get(), protocol::Tag::kToolReply,
                                             protocol::ToolReplyPayload(call_id_, reply),
                                             stop_.get(), ScopedPipeSignalBlock::Active())
                        .ok();
  if (!sent) ended_ = true;  // a reply cut short leaves the stream garbled
  return sent;
}

}  // namespace dolsot
