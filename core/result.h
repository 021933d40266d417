// Result: what one cell returns, identical for every backend, and Outcome, the
// typed answer to "what happened to the cell", set once (first writer wins).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/exit_codes.h"

namespace dolsot {

// An opaque Python object held by a Result (InProcessSession's returned value).
struct PyObjectHandle;

// What happened to a cell. Code that needs to know decides on this, never on
// exit_code or on the wording of `error`.
enum class Outcome : std::uint8_t {
  kOk,           // the cell ran and returned
  kError,        // the cell raised (a toolbox's own exit code included)
  kTimeout,      // the cell was stopped at its deadline (exit 124)
  kInterrupted,  // the cell was stopped by Interrupt() or a stop check (exit 130)
  kCrashed,      // the cell's process died (a segfault, os._exit, an outside kill)
  kRejected,     // a gate refused the cell; none of it ran
  kWorkerLost,   // dolsot could not run the cell: the worker or session process is gone
};

// "ok", "error", "timeout", "interrupted", "crashed", "rejected", "worker_lost".
const char* OutcomeName(Outcome outcome);

// The error type a failure of this kind reports when nothing more precise is
// known: "TimeoutError", "KeyboardInterrupt", "WorkerError" (crashed, worker
// lost), "CellRejected", "Error"; nullptr for kOk.
const char* DefaultErrorType(Outcome outcome);

// What a cell handed back through the final-answer function (CellTools), as
// data rather than a repr. One of the two is set.
struct Returned {
  // Repl: pickle.dumps(value) made in the session process. It comes from the
  // user's code: decode it as hostile (the Python package does, with an
  // allow-list unpickler unless the host opts out).
  std::string pickle;
  // InProcessSession: the object itself (a PyObject*, released under the GIL
  // by the deleter).
  std::shared_ptr<PyObjectHandle> object;
};
struct Result {
  bool ok = true;
  std::optional<std::string> value;  // bounded repr of the trailing expression
  std::string stdout_text;           // what the cell printed (capped at the source)
  std::optional<std::string> error;  // traceback / error message, or nothing
  int exit_code = kExitOk;
  std::vector<std::string> held;     // names now in the session (no dunders)
  std::vector<std::string> dropped;  // names that could not be persisted
  // Why the session's state could not be saved (the store keeps an older
  // one): this cell's checkpoint (sync) or an earlier one (async, eviction).
  // The warning is in `error` too. nullopt: nothing failed to save.
  std::optional<std::string> save_error;
  // The exception's type name when ok is false ("SyntaxError",
  // "ZeroDivisionError", "TimeoutError", a toolbox's own class name...), so no
  // caller parses tracebacks; nullopt when ok.
  std::optional<std::string> error_type;
  // Set when the cell called the final-answer function (and then ok is true).
  std::optional<Returned> returned;
  // PNG bytes of the matplotlib figures the cell showed or left open, in
  // order (embedded/figures.h says how many and how large).
  std::vector<std::string> images;
  // Text()'s cap in characters (0 = none): each backend sets its max_text.
  std::size_t max_text = kDefaultMaxText;

  // A failed Result: ok false, the outcome set, exit_code and error as given,
  // error_type DefaultErrorType(outcome).
  static Result Failure(Outcome outcome, int exit_code, std::string error,
                        std::vector<std::string> held = {});

  // The outcome: the first one set, else kOk or kError as `ok` says (what a
  // cell that ran to its end reports).
  Outcome outcome() const { return outcome_ ? *outcome_ : (ok ? Outcome::kOk : Outcome::kError); }
  // Records the outcome unless one was recorded already (sandbox2's rule: the
  // first observer to classify the cell wins; a later one cannot overwrite,
  // e.g. the crash that a timeout's own SIGKILL causes). True if it took.
  bool SetOutcome(Outcome outcome);

  // stdout + value + error + the dropped and held banners, joined for an
  // agent, within max_text characters: when they do not fit, each part
  // keeps its head and tail (the smaller parts whole, the larger ones an
  // equal share) and a closing line says what was cut and how to see more.
  // A line counts the figures in `images`.
  std::string Text() const;
  // "session now holds: a, b, c" (or "session now holds: nothing").
  std::string HeldBanner() const;
  // "not persisted (kept live in this process only): x, y", or "" when none.
  std::string DroppedBanner() const;

 private:
  std::optional<Outcome> outcome_;
};

}  // namespace dolsot
