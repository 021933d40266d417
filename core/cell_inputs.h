// What a host hands one cell besides its code: host tools the cell may call
// (with the final-answer function) and variables bound before it runs. Plain
// C++: the Python objects are borrowed handles the backends use under the GIL.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/unique_fd.h"

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

// Runs a tool call in the host, off the calling thread: `done` is called once,
// from any thread, possibly after the cell is gone (its reply is then dropped).
using ToolReplyFn = std::function<void(ToolReply)>;
using ToolDispatcher = std::function<void(ToolCall call, ToolReplyFn done)>;
// Serves the calls that come on one cell's own tool pipes
// (backend_subprocess/tool_pipes.h: `calls` the call pipe's read end,
// `replies` the reply pipe's write end, both non-blocking and the host's own)
// on a thread of the host's, which runs each call itself, until `stop` (an
// eventfd) is written at the end of the cell: a round trip of two wake-ups
// instead of a dispatched call's three. Takes the descriptors; false when it
// cannot serve them (they are closed).
using ToolPipesServer = std::function<bool(UniqueFd calls, UniqueFd replies, UniqueFd stop,
                                           std::string_view session_id)>;

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
