// The Python text ty checks for a cell: a prelude that puts the cell in its
// session's context, then the cell itself.
#pragma once

#include <string>

#include "typecheck/type_check.h"

namespace dolsot::typecheck {

struct CellSource {
  std::string text;       // the prelude, then the cell, newline-terminated
  int prelude_lines = 0;  // cell line N is line N + prelude_lines of text
};

// The prelude binds every toolbox alias to its module (`import mytools as
// mt`) and declares every name earlier cells bound as Any (`df: Any = ...`),
// so the cell is checked as it runs in the session and session state never
// causes a rejection. Aliases, modules and names that are not Python
// identifiers (dotted names for modules) are left out, so nothing a caller
// passes can add code to the prelude. A `from __future__` import in the cell
// then no longer opens the file: ty reports that (invalid-syntax, which the
// gate ignores) and checks the rest as usual.
CellSource BuildCellSource(const TypeCheckRequest& request);

}  // namespace dolsot::typecheck
