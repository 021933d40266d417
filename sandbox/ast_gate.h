// The AST gate as a core CellGate: what the CLI's --gate and both backends
// install. A rejected cell's GateVerdict.message is "rejected by the gate:"
// then the findings, one per line: "line 3, col 5: [rule-id] message".
#pragma once

#include "core/cell_gate.h"
#include "sandbox/check_cell.h"
#include "sandbox/policy.h"

namespace dolsot {

// A gate over sandbox::DefaultPolicy().
CellGate MakeAstGate();
// A gate over `policy` (copied; the gate owns its copy and is thread-safe).
CellGate MakeAstGate(sandbox::Policy policy);

}  // namespace dolsot
