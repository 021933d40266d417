// CPython's own reading of a cell for the AST gate: where every statement
// starts, from CPython's parser (the gate compares it with tree-sitter's).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dolsot {

struct CpythonStatementStart {
  std::uint32_t line = 0;    // ast lineno (1-based)
  std::uint32_t column = 0;  // ast col_offset (UTF-8 bytes)
};

// Every statement of `code` (nested ones, elif too), sorted by position.
// InvalidArgument (with CPython's message) when CPython cannot parse it;
// Unavailable when no interpreter runs in this process. Takes the GIL itself
// (any thread, with or without it); the caller keeps the interpreter up while
// it runs (a lease, or a Python host). Costs about one ast.parse.
StatusOr<std::vector<CpythonStatementStart>> CpythonStatementStarts(std::string_view code);

}  // namespace dolsot
