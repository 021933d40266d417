// CheckCell: parses a cell with tree-sitter-python and walks the tree against a
// Policy, returning every finding (an empty vector means the cell is allowed).
#pragma once

#include <string_view>
#include <vector>

#include "core/gate_memory.h"
#include "sandbox/finding.h"
#include "sandbox/policy.h"

namespace dolsot::sandbox {

// Never throws, never crashes, terminates on any input: a cell it cannot read
// (bad UTF-8, syntax errors, too large or too deep) yields findings (fail
// closed). Thread-safe: each thread parses with its own parser; `policy` is
// only read. Findings are in source order, at most policy.max_findings + 1.
// A cell whose tokens prove it allowed (PrescanProvesAllowed) is accepted
// without a parse; such a cell may still be invalid Python, which CPython
// then refuses to compile (nothing runs): see docs/gate.md, "The fast path".
// One cell on its own, with no session memory: as the gate cannot know what a
// later cell does with its classes, `self._x` in plain methods is refused
// (a session's gate uses CheckSessionCell).
std::vector<Finding> CheckCell(std::string_view code, const Policy& policy);

// One cell of a session. `memory` is what the session's earlier cells sealed
// (docs/gate.md, "The gate's memory"): the names of sealed classes get the
// sealed uses only, their plain methods are never read off a class, a class
// deriving from one is sealed and may have no base the gate cannot vouch
// for. `self._x` in plain methods needs the policy's flag and a complete
// memory. When the cell is allowed, `learned` (may be null) gets what it
// seals: the memory's next state is `memory` merged with it.
std::vector<Finding> CheckSessionCell(std::string_view code, const Policy& policy,
                                      const GateMemory& memory, GateMemory* learned);

// CheckCell without the fast path: always parses and walks (tests, benchmarks).
std::vector<Finding> CheckCellFullPath(std::string_view code, const Policy& policy);
std::vector<Finding> CheckSessionCellFullPath(std::string_view code, const Policy& policy,
                                              const GateMemory& memory, GateMemory* learned);

}  // namespace dolsot::sandbox
