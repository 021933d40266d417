// InProcessSession: the backend that runs cells in the host's own CPython,
// against one live namespace dict per session id. Injected objects are the
// very same objects inside a cell; the host reads what a cell made straight
// from the namespace. No isolation; the timeout is cooperative (see Run).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/cell_gate.h"
#include "core/config.h"


namespace dolsot {

struct InProcessOptions {
  // alias -> importable module name, imported once by Create.
  std::vector<std::pair<std::string, std::string>> toolboxes;
  // alias -> any live object (borrowed; Create takes its own reference, so
  // the caller must hold the GIL when this is not empty). A str object is
  // imported as a module name, like `toolboxes`.
  std::vector<std::pair<std::string, PyObject*>> objects;
  // timeout_seconds, max_output, typecheck, ty_bin (explicit > DOLSOT_* > default).
  ConfigOverrides config;
  // Optional gates, in the pipeline's order: the AST gate, the type gate
  // (from `config`, over the module toolboxes), this one. A rejected cell
  // returns ok == false, exit 1, Outcome::kRejected, and does not run.
  CellGate ast_gate;
  CellGate gate;
};

// Thread safety: every method may be called from any thread, with or without
// the GIL (a caller holding it has it released while Run waits). Cells of
// different sessions run in parallel (as far as the GIL lets them); a call on
// a session waits for that session's running call to return.
class InProcessSession final : public Backend {
 public:
  // Takes a lease on the interpreter (embedded/interpreter.h), which starts
  // CPython if none runs yet, imports the toolboxes (kInvalidToolbox when one
  // does not import or an alias is not an identifier) and resolves the
  // configuration. Sessions share the interpreter: one that dolsot started is
  // finalized when the last lease goes, after the last InProcessSession is
  // closed and the last of their late cells has ended; the next Create then
  // starts a fresh one.
  static StatusOr<std::unique_ptr<InProcessSession>> Create(InProcessOptions options);
  ~InProcessSession() override;  // Close()

  // Runs one cell on a pooled worker thread and waits at most the timeout.
  // At the deadline it returns exit 124 with the output so far; the engine
  // then raises KeyboardInterrupt in the cell's thread (which stops a
  // pure-Python loop). A cell stuck in C code keeps its thread: it counts in
  // LeakedThreads() until it ends, and its session refuses new cells (kBusy)
  // until then or until Reset. Result::dropped is always empty.
  StatusOr<Result> Run(std::string_view session_id, std::string_view code,
                       const RunOptions& options) override;
  // Live objects; no hard timeout, no crash survival, no branch.
  const Capabilities& capabilities() const override;
  // Wakes the caller's Run, which returns kInterrupted (exit 130) with the
  // output so far, and raises KeyboardInterrupt in the cell's thread, as a
  // timeout does.
  Status Interrupt(std::string_view session_id) override;
  // Live sessions; size_bytes is 0 (nothing is serialized).
  StatusOr<std::vector<SessionInfo>> Sessions() override;
  // Forgets one session (or every one with "all"): its next cell starts from
  // a fresh namespace holding only the injected objects.
  StatusOr<int> Reset(std::string_view session_id_or_all) override;
  // Stops the idle worker threads, forgets every session and releases the
  // lease. It waits for late cells' stoppers (each gives up 2 s after its
  // deadline), never for a cell stuck in C code: that cell's thread keeps a
  // lease until it ends, so the interpreter is not finalized under it (and is
  // not finalized at all if the process exits first). Called holding the GIL,
  // it finalizes nothing (embedded/interpreter.h). Idempotent.
  Status Close() override;

  // The session's namespace dict itself (a new reference), created if the
  // session does not exist yet. Needs the GIL.
  StatusOr<PyObject*> Namespace(std::string_view session_id) override;
  // Cell threads that outlived their deadline and are still running.
  int LeakedThreads() const;
  // The same, per id of the session whose cell it is: a cell that catches
  // the engine's KeyboardInterrupt keeps running (and is listed here) after
  // its session's reset and after Close, until it ends by itself.
  std::map<std::string, int> LeakedCells() const;

  class Impl;

 private:
  explicit InProcessSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dolsot
