// Backend: the one interface both backends (Repl, InProcessSession) implement,
// and the only door to them: the CLI, the bindings and C++ hosts use nothing
// else. Optional operations answer kUnimplemented instead of growing side doors.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cell_inputs.h"
#include "core/live_output.h"
#include "core/result.h"
#include "core/sandbox_report.h"
#include "core/session_info.h"
#include "core/status.h"

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

// Polled about every 50 ms while a cell runs; true stops the cell as
// Interrupt() does (Outcome::kInterrupted, exit 130). A Python host polls
// for Ctrl-C with it, the CLI for SIGINT/SIGTERM.
using StopCheck = std::function<bool()>;

struct RunOptions {
  std::optional<double> timeout_seconds;  // nullopt: the backend's timeout
  StopCheck should_stop;                  // optional
  // Host tools and the final-answer function this cell may call
  // (capabilities().tools), and names bound before it runs. The Python
  // objects they hold are borrowed for the duration of Run.
  CellTools tools;
  std::vector<CellVariable> variables;
  // Optional: what the cell prints and shows, as it does (core/live_output.h;
  // bounded as the Result's stdout, by max_output). The Result is unchanged.
  OutputCallbacks live;
};

// What a backend can promise; a host (or an agent framework) reads it
// instead of knowing which backend it holds.
struct Capabilities {
  bool hard_timeout = false;    // a runaway cell is killed at its deadline (else cooperative)
  bool crash_survival = false;  // a crashing cell (segfault, os._exit) costs neither host nor session
  bool live_objects = false;    // injected objects are shared by reference; Namespace() works
  bool sandbox = false;         // cells run inside kernel-enforced walls (Sandbox policy)
  bool tools = false;           // cells can call host tools
  bool branch = false;          // Branch() works
  bool durable = false;         // sessions are checkpointed to a store and outlive the backend
};

// Thread safety: every method may be called from any thread, with or without
// the GIL (a caller holding it has it released while a method waits). Calls
// on different sessions may run in parallel; calls on one session are served
// in arrival order (or refused with kBusy where a backend documents it).
// Errors: a caller mistake (bad session id, empty code) is a non-OK Status
// returned before any code runs, and so is a store that cannot be read. A
// failure of the user's code is not an error: it is an OK StatusOr holding a
// Result with ok == false and its Outcome.
class Backend {
 public:
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  virtual ~Backend() = default;

  virtual const Capabilities& capabilities() const = 0;

  // Runs one cell: the session is made ready, the gates see the cell
  // (CellPipeline), then it runs, all under options' timeout.
  virtual StatusOr<Result> Run(std::string_view session_id, std::string_view code,
                               const RunOptions& options) = 0;
  // Stops the cell running in `session_id` now, if one runs (else nothing):
  // its Run returns Outcome::kInterrupted, exit 130, with the output so far.
  // Repl kills the cell and rolls the session back; InProcessSession raises
  // KeyboardInterrupt in the cell's thread (cooperative, as its timeout).
  virtual Status Interrupt(std::string_view session_id) = 0;
  // Sessions this backend knows (live or stored).
  virtual StatusOr<std::vector<SessionInfo>> Sessions() = 0;
  // Forgets one session, or every one with "all"; returns how many.
  virtual StatusOr<int> Reset(std::string_view session_id_or_all) = 0;
  // Releases every resource (flushing pending checkpoints). Idempotent.
  virtual Status Close() = 0;

  // Optional (capabilities().branch): a new session `new_id` holding a copy
  // of `source_id`'s state. Default: kUnimplemented.
  virtual Status Branch(std::string_view source_id, std::string_view new_id);
  // Optional (capabilities().live_objects): the session's namespace dict
  // itself, a new reference, created if the session is new. Needs the GIL.
  // Default: kUnimplemented.
  virtual StatusOr<PyObject*> Namespace(std::string_view session_id);
  // Optional (capabilities().durable): session `session_id` leaves this
  // backend: once a cell running in it has finished, its state is saved to
  // the store and what held it live ends; the next Run restores it. OK when
  // it is not live here. Default: kUnimplemented.
  virtual Status Release(std::string_view session_id);
  // The ids of the sessions Release would act on (live here, sorted).
  // Default: none (a backend without Release).
  virtual std::vector<std::string> LiveSessions();
  // Optional (capabilities().sandbox): the layers the backend's cells run
  // under, starting what runs them if needed. An error when they run in no
  // walls (Repl: kInvalidArgument). Default: kUnimplemented.
  virtual StatusOr<SandboxReport> SandboxStatus();
};

// Checks a run request the same way in every backend: a valid session id,
// non-empty code, and valid tool and variable names (ValidateCellInputs).
Status ValidateRunRequest(std::string_view session_id, std::string_view code,
                          const RunOptions& options = {});

}  // namespace dolsot
