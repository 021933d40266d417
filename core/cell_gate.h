// CellGate: a check a backend runs on a cell before running it (the AST gate
// of sandbox/, the type gate, a caller's own), and what it is told and answers.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/gate_memory.h"

namespace dolsot {

// What a gate sees of a cell. Valid for the duration of the call.
struct GateRequest {
  std::string_view code;
  // The names the session holds from earlier cells (a restored session's too).
  const std::vector<std::string>& held;
  // The cell's deadline: a gate's own time counts inside the cell's timeout.
  std::chrono::steady_clock::time_point deadline;
  // What the AST gate remembers of the session's earlier cells (the backend's,
  // per session). nullptr: a gate that needs it must assume the worst (the
  // AST gate then refuses `self._x` in plain methods).
  const GateMemory* memory = nullptr;
};

struct GateVerdict {
  bool allowed = true;
  std::string message;  // why the cell was rejected (one finding per line)
  // Allowed cells: what the session's memory gains once the cell runs.
  GateMemory learned;
};

// Must be callable from any thread. A gate that fails must reject (fail
// closed), unless it documents that it fails open (the type gate).
using CellGate = std::function<GateVerdict(const GateRequest& request)>;
// Optional: lets a slow gate start its work early (ty's start-up) while the
// backend does its own (a session restore). Never blocks.
using GateWarmUp = std::function<void(const GateRequest& request)>;

}  // namespace dolsot
