// What a host hands one cell besides its code: host tools the cell may call
// (with the final-answer function) and variables bound before it runs. Plain
// C++: the Python objects are borrowed handles the backends use under the GIL.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

// A call of a host tool made by a cell in another process (Repl): the tool's
// name and pickle.dumps((args, kwargs)) as the cell made it. The bytes come
// from the user's code: whoever decodes them must treat them as hostile.
struct ToolCall {
  std::string name;
  std::string arguments;
  std::string session_id;  // the session whose cell made the call
};

// The host's answer: ok with pickle.dumps(value), or not ok with a pickled
// description of the exception (see embedded/cell_tools.h).
struct ToolReply {
  bool ok = false;
  std::string payload;
};

// Two pickles both ends of a tool call make and recognise without the pickle
// module: the arguments of a call without any, ((), {}) (PROTO 5,
// EMPTY_TUPLE, EMPTY_DICT, TUPLE2, STOP), and what pickle.dumps(None, 5)
// makes.
inline constexpr std::string_view kNoArgumentsPickle("\x80\x05)}\x86.", 6);
inline constexpr std::string_view kNonePickle("\x80\x05N.", 4);

// Runs a tool call in the host, off the calling thread: `done` is called once,
// from any thread, possibly after the cell is gone (its reply is then dropped).
using ToolReplyFn = std::function<void(ToolReply)>;
using ToolDispatcher = std::function<void(ToolCall call, ToolReplyFn done)>;
// One cell's own channel for its tool calls, as the host's serving thread
// sees it (a Repl's: backend_subprocess/tool_pipes.h). One thread calls
// Receive and Reply in turn; a thread that serves many calls holds a
// ScopedPipeSignalBlock (core/pipe_signal.h) meanwhile, else each Reply
// blocks SIGPIPE itself.
class ToolCallPipe {
 public:
  ToolCallPipe() = default;
  ToolCallPipe(const ToolCallPipe&) = delete;
  ToolCallPipe& operator=(const ToolCallPipe&) = delete;
  virtual ~ToolCallPipe() = default;

  // The next call (its name and arguments; session_id left empty); nullopt
  // once the cell is over or its end sent something that is not a call
  // (nothing is read after that).
  virtual std::optional<ToolCall> Receive() = 0;
  // Answers the call Receive returned last, once; false when the reply is
  // dropped (the cell is over, or stopped reading).
  virtual bool Reply(const ToolReply& reply) = 0;
};

// Serves the calls that come on one cell's own tool pipe on a thread of the
// host's, which runs each call itself, until the pipe's Receive says the
// cell is over: a round trip of two wake-ups instead of a dispatched call's
// three. Takes the pipe; false when it cannot serve it (it is closed, and
// the cell's call there fails).
using ToolPipesServer =
    std::function<bool(std::unique_ptr<ToolCallPipe> pipe, std::string_view session_id)>;

// The host tools one cell sees. They are bound as builtins of the session
// (never in its namespace: not held, not dropped, never checkpointed), so a
// cell may shadow one with a name of its own.
struct CellTools {
  std::vector<std::string> names;  // the tools' names
  // InProcessSession: name -> callable (a borrowed dict), called directly.
  PyObject* callables = nullptr;
  // Repl: how a call from the session process reaches the host.
  ToolDispatcher dispatch;
  // Repl, optional: how a cell's own tool pipes are served (without it every
  // call goes through `dispatch`).
  ToolPipesServer serve_pipes;
  // The final-answer function ("SUBMIT", say; empty: none). Calling it ends
  // the cell successfully with Result::returned set to what it was given.
  std::string final_name;

  bool empty() const { return names.empty() && final_name.empty(); }
};

// A name bound in the session just before the cell runs (run(..., variables=)).
// The bound value belongs to the session from then on, like any other name.
struct CellVariable {
  std::string name;
  // InProcessSession: the object itself (borrowed), bound by reference.
  PyObject* object = nullptr;
  // Repl: the value pickled by the caller, and a digest of those bytes: a
  // value the session already received under this name (same digest) is not
  // sent again, however big.
  std::shared_ptr<const std::string> pickle;
  std::string digest;  // of `pickle` (any strong hash; the caller's choice)
};

// `held` followed by the variables', tools' and final-answer function's names
// (what a gate should take as bound when the cell starts).
std::vector<std::string> NamesInScope(const std::vector<std::string>& held, const CellTools& tools,
                                      const std::vector<CellVariable>& variables);

// Tool and variable names must be identifiers that are neither keywords, nor
// builtins (a tool replacing `print` would change every cell), nor dunders,
// nor used twice; the final-answer function's name likewise. kInvalidArgument
// naming the name otherwise.
Status ValidateCellInputs(const CellTools& tools, const std::vector<CellVariable>& variables);

}  // namespace dolsot
