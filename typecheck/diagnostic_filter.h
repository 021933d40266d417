// From ty's diagnostics to the gate's verdict: keeps those about calls into
// a toolbox (and a toolbox's missing attributes), mapped to the cell's lines.
// Everything else ty says is left to run time, so code ty cannot follow
// never causes a rejection.
#pragma once

#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "typecheck/cell_source.h"
#include "typecheck/type_check.h"

namespace dolsot::typecheck {

// `items`: the "items" of ty's textDocument/diagnostic report on the checked
// file `cell_path` (whose text was `source`). A diagnostic is kept when it
// lies in the cell (not the prelude) and either
//   - its rule is a call rule (invalid-argument-type, missing-argument,
//     too-many-positional-arguments, unknown-argument,
//     parameter-already-assigned, no-matching-overload,
//     positional-only-parameter-as-kwarg) and its first related location
//     (where ty says the callee is defined) lies in a toolbox module's
//     source, or, when ty gives none, its line calls `alias.fn` for the
//     function the message names;
//   - or it is missing-attribute on a toolbox module (`mt.no_such_fn`).
// Items of an unexpected shape are skipped. Messages keep their first line;
// columns are 1-based code points (the server was asked for utf-32).
std::vector<TypeDiagnostic> ToolboxDiagnostics(const nlohmann::json& items,
                                               const TypeCheckRequest& request,
                                               const CellSource& source,
                                               std::string_view cell_path);

}  // namespace dolsot::typecheck
