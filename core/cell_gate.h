// CellGate: an optional check a backend runs on a cell before running it
// (the AST gate of sandbox/, a Python callable, or the host's own).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace dolsot {

struct GateVerdict {
  bool allowed = true;
  std::string message;  // why the cell was rejected (one finding per line)
};

// Must be callable from any thread. A gate that fails must reject (fail closed).
using CellGate = std::function<GateVerdict(std::string_view code)>;

}  // namespace dolsot
