// ToolPipes: a cell's own pipes for host tool calls, beside the runner's socket.
//
// A call sent on the runner's socket wakes the host thread awaiting the
// cell's Result, which hands it to a tool thread: three wake-ups per round
// trip. So on its first call of a cell the session process (ToolChannel)
// makes two pipes, one for the cell's calls and one for the host's replies,
// and hands the host its ends (a TOOL_PIPES frame on the runner's socket:
// the call pipe's read end, the reply pipe's write end). A host thread reads
// calls there and runs each one itself (ToolPipesHost): two wake-ups, and a
// pipe's write and read cost less than a socket's (the same 64-byte exchange
// between two C processes: 4.8 us over pipes, 8.5-9.2 us over a socket
// pair). A call made while another waits there goes on the runner's socket
// instead, so calls from several of the cell's threads still run at once.
// Both waiting ends spin briefly before they sleep (core/spin_wait.h,
// SpinBudget::kPeers). Each frame carries its sender's SpinNowNanos(), from
// which the waiter learns how long to spin.
//
// The session process made the pipes, so the cell's code may hold every end
// of them. The host therefore reads and writes only descriptions of its own
// (the ends reopened through /proc/self/fd, non-blocking, so a cell cannot
// make them blocking), and every wait of its thread also watches a stop
// eventfd of the host's, written when the cell is over (returned, killed or
// lost): that ends Receive() and a Reply() waiting on a full pipe (a cell
// that never reads its replies), and a reply from a tool still running then
// (abandoned) goes nowhere. A frame that is not a well-formed TOOL_CALL (a
// cell writing garbage, or frames of several threads interleaved) ends the
// serving: the cell's waiting call then fails, or times out with the cell.
#pragma once

#include <cstdint>
#include <optional>

#include "backend_subprocess/protocol.h"
#include "core/cell_inputs.h"
#include "core/unique_fd.h"

namespace dolsot {

// The host's ends of one cell's tool pipes, as it keeps them.
struct HostToolPipes {
  UniqueFd calls;    // the call pipe's read end, non-blocking
  UniqueFd replies;  // the reply pipe's write end, non-blocking
};

// The descriptors of a TOOL_PIPES frame (the frame came from the cell's
// process, whose code may have written it), checked and made the host's own:
// `calls` must be a pipe's read end and `replies` a pipe's write end; each
// is reopened as a new non-blocking description (or, where /proc is not
// there, made non-blocking in place). kInvalidArgument naming what is wrong.
StatusOr<HostToolPipes> AcceptToolPipes(UniqueFd calls, UniqueFd replies);

// The host's ends of one cell's tool pipes, the ToolCallPipe a Repl hands its
// host's ToolPipesServer: one thread calls Receive and Reply in turn.
class ToolPipesHost final : public ToolCallPipe {
 public:
  // `stop`: an eventfd the host writes when the cell is over.
  ToolPipesHost(HostToolPipes pipes, UniqueFd stop)
      : pipes_(std::move(pipes)), stop_(std::move(stop)) {}

  // The next call (its name and arguments; session_id left empty), spinning
  // before it sleeps; nullopt once stopped, the session's ends closed, or a
  // frame was not a well-formed TOOL_CALL (nothing is read after that).
  std::optional<ToolCall> Receive() override;
  // Answers the call Receive returned last, once; false when the reply is
  // dropped (the cell is over, or stopped reading).
  bool Reply(const ToolReply& reply) override;

 private:
  HostToolPipes pipes_;
  UniqueFd stop_;
  protocol::BufferedFrameReader reader_;
  std::uint64_t call_id_ = 0;
  bool answered_ = true;
  bool ended_ = false;
};

}  // namespace dolsot
