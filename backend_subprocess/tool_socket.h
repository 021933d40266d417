// ToolSocket: a cell's own socket for host tool calls, beside the runner's.
//
// A call sent on the runner's socket wakes the host thread awaiting the
// cell's Result, which hands it to a tool thread: three wake-ups per round
// trip where a pipe's costs two. So on its first call of a cell the session
// process (ToolChannel) makes a socket for the cell's calls and hands the
// host its end (a TOOL_SOCKET frame on the runner's socket). A host thread
// reads calls from it and runs each one itself (ToolSocketHost); a call made
// while another waits on that socket goes the runner's socket instead, so
// calls from several of the cell's threads still run at once. Both waiting
// ends spin briefly before they sleep (core/spin_wait.h, SpinBudget::kPeers):
// the session for a reply, the host for the next call (sleeping, if its spin
// saw nothing, in the recv itself). Each frame carries its sender's
// SpinNowNanos(), from which the waiter learns how long to spin.
//
// The host thread awaiting the Result shuts the socket down when the cell is
// over (returned, killed or lost): that ends Receive(), and a reply from a
// tool still running then (abandoned) goes nowhere. Nothing else is ever
// written on this socket, so a late reply cannot meet another cell's frames.
#pragma once

#include <cstdint>
#include <optional>

#include "backend_subprocess/protocol.h"
#include "core/cell_inputs.h"
#include "core/unique_fd.h"

namespace dolsot {

// Whether `fd` is what a session may hand as its tool socket: an AF_UNIX
// stream socket (the frame came from the cell's process, whose code may have
// written it; anything else is refused before any thread waits on it).
bool IsToolSocket(int fd);

// The host's end of one cell's tool socket: one thread calls Receive and
// Reply in turn.
class ToolSocketHost {
 public:
  explicit ToolSocketHost(UniqueFd socket) : socket_(std::move(socket)) {}
  ToolSocketHost(const ToolSocketHost&) = delete;
  ToolSocketHost& operator=(const ToolSocketHost&) = delete;

  // The next call (its name and arguments; session_id left empty), spinning
  // before it sleeps; nullopt once the socket was shut down, the session's
  // end closed, or a frame was not a well-formed TOOL_CALL.
  std::optional<ToolCall> Receive();
  // Answers the call Receive returned last, once; false when the session is
  // gone (the reply is dropped).
  bool Reply(const ToolReply& reply);

 private:
  UniqueFd socket_;
  protocol::BufferedFrameReader reader_;
  std::uint64_t call_id_ = 0;
  bool answered_ = true;
};

}  // namespace dolsot
