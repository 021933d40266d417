// CheckCell: parses a cell with tree-sitter-python and walks the tree against a
// Policy, returning every finding (an empty vector means the cell is allowed).
#pragma once

#include <string_view>
#include <vector>

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
std::vector<Finding> CheckCell(std::string_view code, const Policy& policy);

// CheckCell without the fast path: always parses and walks (tests, benchmarks).
std::vector<Finding> CheckCellFullPath(std::string_view code, const Policy& policy);

}  // namespace dolsot::sandbox
