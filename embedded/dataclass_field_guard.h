// The dataclass Field guard: `dataclasses` writes each field's `name` into
// the source of the methods it generates and exec's it when a class (or a
// subclass) is processed, so a cell that rewrites a Field's name
// (`dataclasses.fields(A)[0].name = "x,__import__('os')..."`, or a kept
// `field()` object after its class was made) would run code of its choice.
// Once installed, `dataclasses.Field` has a `__setattr__` and `__delattr__`
// that refuse a store made by a gated session's own code (the storing
// frame's globals are the session's namespace, during its cell or later:
// embedded/gated_code.h) with an AttributeError carrying the
// `module-assignment` finding. dataclasses' own processing, which fills in
// Fields while a gated cell defines a dataclass, stores from its own frames
// and is let through, as is every other store.
//
// Needs the GIL.
#pragma once

#include "core/status.h"

namespace dolsot {

// Installs the guard on this interpreter's dataclasses.Field. Idempotent.
Status InstallDataclassFieldGuard();

}  // namespace dolsot
