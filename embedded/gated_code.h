// Whose code is storing: the gated cell running on this thread
// (embedded/gated_cell.h), or else, when the innermost Python frame runs a
// gated session's own code after its cell returned (a generator's
// `finally`, a `__del__`, a callback the host calls later), that session.
// A frame is a gated session's when its globals' `__builtins__` is a dict
// whose `__import__` is the guarded import (embedded/module_view.h): only a
// gated session's builtins hold it, and a cell can rebind neither name (the
// AST gate refuses both). Such a session is known by its builtins'
// `__name__` (its classes' marker); the classes its cells made through
// `type.__new__` are not known then (fail closed: they count as foreign).
//
// Needs the GIL.
#pragma once

#include "embedded/gated_cell.h"

namespace dolsot {

// The gated code running now, or nullptr. `scratch` receives the second
// kind (it must outlive the use of the result).
const GatedCell* GatedCodeRunning(GatedCell& scratch);

}  // namespace dolsot
