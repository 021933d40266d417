// The decision, without ty, that a cell cannot reach any toolbox, so ty
// would have nothing to say about it and is not even started.
#pragma once

#include "typecheck/type_check.h"

namespace dolsot::typecheck {

// True only when the cell provably cannot reach a toolbox: its bytes are all
// ASCII (so no NFKC spelling of an alias), never contain "import" (which
// catches __import__ and importlib too), never hold a toolbox alias as a
// whole word, and no toolbox module shares its top-level name with the
// standard library or typeshed's stub directories (whose stubs a cell
// reaches through builtins without importing anything). Every other name a
// cell can use is a builtin or a session name, which the prelude types as Any.
//
// The scan reads raw bytes, strings and comments included, on purpose: it
// may only ever err towards running ty. It cannot misread a cell the way a
// tokenizer that disagreed with CPython could.
bool CannotReachAToolbox(const TypeCheckRequest& request);

}  // namespace dolsot::typecheck
