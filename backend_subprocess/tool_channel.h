// ToolChannel: the session process's end of host tool calls. While a cell
// runs, any of its threads may call a tool: the call goes to the host as a
// TOOL_CALL frame and the thread waits for its TOOL_REPLY; one waiting thread
// at a time reads and hands other threads their replies. A call goes on the
// cell's own tool pipes (tool_pipes.h: the host runs it on the thread that
// reads it, two wake-ups a round trip) when the host serves them and no
// other call waits there, else on the runner's socket (the host hands it to
// a tool thread). Every frame is written under write_mutex(), so frames of
// several threads never interleave, whatever their size. The reading thread
// spins briefly before it sleeps, by a budget learned from the replies'
// stamps (core/spin_wait.h). When the cell ends, waiting calls fail, the
// tool pipes are closed and nothing of the channel reads the runner's socket
// any more (the session's own loop does).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "backend_subprocess/fork_guard.h"
#include "backend_subprocess/protocol.h"
#include "core/cell_inputs.h"
#include "core/spin_wait.h"
#include "core/status.h"
#include "core/unique_fd.h"

namespace dolsot {

class SocketSink;

class ToolChannel {
 public:
  ToolChannel();
  ToolChannel(const ToolChannel&) = delete;
  ToolChannel& operator=(const ToolChannel&) = delete;

  // Held for every frame written on the runner's socket while a cell may run
  // (stdout chunks, tool calls), so frames never interleave.
  std::mutex& write_mutex() { return write_mutex_; }

  // Calls may be made from now on, on `socket` (the runner's); with
  // `tool_pipes`, the host serves pipes of the cell's own (RUN says so).
  void BeginCell(int socket, bool tool_pipes);
  // Refuses new calls, fails the waiting ones, closes the tool pipes, and
  // returns once no thread reads or writes for the channel: the Result may go
  // out.
  void EndCell();
  // While a cell runs with `sink` (nullptr: none): the output it leaves
  // waiting goes out before each call's frame, so the host sees a cell's
  // output and calls in the order the cell made them (socket_sink.h).
  void SendOutputFirst(SocketSink* sink);

  // Sends one call and waits for its reply. Call without the GIL.
  StatusOr<ToolReply> Call(std::string_view name, std::string_view arguments);

  // transport(name: str, args: tuple, kwargs: dict, failed) -> the tool's
  // result, the callable the tool stubs use (embedded/cell_tools.h): it
  // pickles the arguments, calls, and unpickles the reply in C; every other
  // outcome returns failed(args, kwargs, error, reply), the stub's Python
  // (which raises). A new reference to a Python function bound to this
  // channel, or nullptr with an error set.
  // Needs the GIL; the channel must outlive it (it lives as long as the
  // session process).
  PyObject* NewTransport();

  // In a child just forked (by the one thread left): the locks as new, no
  // call open. Another thread of the parent may have held one at the fork.
  void AfterFork();

 private:
  // The cell's tool pipes, made and their host's ends handed to the host
  // (write_mutex_ held).
  Status OpenToolPipes();
  // Reads one frame (a reply, routed to its waiter) unless woken first.
  void ReadOne(std::unique_lock<std::mutex>& lock);
  void Wake();

  int socket_ = -1;
  UniqueFd wake_;  // an eventfd: wakes the reading thread (the cell ended, tool pipes opened)
  SpinBudget reply_budget_{SpinBudget::kPeers};  // how long the reading thread spins for a reply
  std::mutex write_mutex_;
  std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  bool open_ = false;
  bool reading_ = false;
  bool reading_runner_ = false;  // the reading thread waits on the runner's socket too
  bool tool_pipes_served_ = false;  // the host serves tool pipes this cell
  // The process ignored SIGPIPE when the cell began: writing to the pipes
  // need not block it (a cell that stops ignoring it meanwhile and then
  // writes to a pipe the host closed ends its own process).
  bool pipe_signal_ignored_ = false;
  // The cell's ends, once made (set under write_mutex_ too): the call
  // pipe's write end and the reply pipe's read end.
  fork_guard::GuardedFd tool_calls_;
  fork_guard::GuardedFd tool_replies_;
  protocol::BufferedFrameReader tool_reader_;  // their replies (used by the reading thread)
  bool tool_pipes_failed_ = false;    // could not be made, or the host stopped serving them
  std::uint64_t tool_pipes_call_ = 0;  // the call waiting there (0: none)
  std::uint64_t next_id_ = 1;
  SocketSink* output_first_ = nullptr;  // guarded by write_mutex_
  std::map<std::uint64_t, std::optional<StatusOr<ToolReply>>> waiting_;
};

}  // namespace dolsot
