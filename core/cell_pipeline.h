// CellPipeline: what happens to every cell of every backend between the call
// and the run, in one order: the AST gate, the type gate, the caller's gate;
// the first that rejects ends the cell with the same Result on both backends
// (ok false, exit 1, Outcome::kRejected, the session's names in `held`).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/cell_gate.h"
#include "core/result.h"

namespace dolsot {

// The gates a backend was configured with; any may be empty (absent).
struct GateSet {
  CellGate ast_gate;     // sandbox/ast_gate.h
  CellGate type_gate;    // the ty type gate (fails open)
  GateWarmUp type_gate_warm_up;
  CellGate caller_gate;  // the host's own
};

// Immutable once built; thread-safe (the gates are).
class CellPipeline {
 public:
  CellPipeline() = default;
  explicit CellPipeline(GateSet gates);

  // Lets gates start slow work before the session is ready. Never blocks.
  void WarmUp(const GateRequest& request) const;
  // Runs the gates in order. nullopt: the cell may run (`learned`, when not
  // null, gets what the gates learned of it); else the Result of the rejected
  // cell (it must not run).
  std::optional<Result> Admit(const GateRequest& request, GateMemory* learned = nullptr) const;

  // Admit against the session's gate memory, then `execute()` if admitted.
  // What the gates learned of the cell joins `memory` before it runs, so
  // every checkpoint taken from then on carries it; a backend that rolls the
  // session back to before the cell puts the memory back too (Repl). A cell
  // that raises, times out in process, or runs on past its deadline keeps
  // its names sealed: more sealed names is the safe side. `execute` returns
  // a Result or a StatusOr<Result>, and so does Run.
  template <typename Execute>
  auto Run(GateRequest request, SessionGateMemory& memory, Execute&& execute) const
      -> decltype(execute()) {
    const GateMemory known = memory.Get();
    request.memory = &known;
    GateMemory learned;
    if (std::optional<Result> rejected = Admit(request, &learned)) return *std::move(rejected);
    memory.Learn(learned);
    return std::forward<Execute>(execute)();
  }

 private:
  struct Stage {
    const char* name;
    CellGate gate;
  };
  std::vector<Stage> stages_;
  GateWarmUp warm_up_;
};

}  // namespace dolsot
