// ToolChannel: the session process's end of host tool calls. While a cell
// runs, any of its threads may call a tool: the call goes to the host as a
// TOOL_CALL frame and the thread waits for its TOOL_REPLY; one waiting thread
// at a time reads the socket and hands other threads their replies. When the
// cell ends, waiting calls fail and nothing of the channel reads the socket
// any more (the session's own loop does).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "core/cell_inputs.h"
#include "core/status.h"
#include "core/unique_fd.h"

namespace dolsot {

class ToolChannel {
 public:
  ToolChannel();
  ToolChannel(const ToolChannel&) = delete;
  ToolChannel& operator=(const ToolChannel&) = delete;

  // Held for every frame written on the socket while a cell may run (stdout
  // chunks, tool calls), so frames never interleave.
  std::mutex& write_mutex() { return write_mutex_; }

  // Calls may be made from now on, on `socket` (the runner's).
  void BeginCell(int socket);
  // Refuses new calls, fails the waiting ones, and returns once no thread
  // reads or writes the socket for the channel: the Result may go out.
  void EndCell();

  // Sends one call and waits for its reply. Call without the GIL.
  StatusOr<ToolReply> Call(const std::string& name, const std::string& arguments);

  // transport(name: str, payload: bytes) -> (ok: bool, reply: bytes), the
  // callable the tool stubs use (embedded/cell_tools.h): a new reference to
  // a Python function bound to this channel, or nullptr with an error set.
  // Needs the GIL; the channel must outlive it (it lives as long as the
  // session process).
  PyObject* NewTransport();

  // In a child just forked (by the one thread left): the locks as new, no
  // call open. Another thread of the parent may have held one at the fork.
  void AfterFork();

 private:
  // Reads one frame (a reply, routed to its waiter) unless woken first.
  void ReadOne(std::unique_lock<std::mutex>& lock);

  int socket_ = -1;
  UniqueFd wake_;  // an eventfd: EndCell wakes the reading thread
  std::mutex write_mutex_;
  std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  bool open_ = false;
  bool reading_ = false;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, std::optional<ToolReply>> waiting_;
};

}  // namespace dolsot
