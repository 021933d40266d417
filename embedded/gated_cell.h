// The gated cell running on this thread, if any: what the runtime half of
// the AST gate (module views, table views, the class-store guard, the
// dataclass Field guard) consults on a store. Set only by GatedSession's
// CellScope, around a gated session's cell, on the cell's own thread.
#pragma once

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

struct GatedCell {
  // The session's builtins' __name__: a str object of its own, which every
  // class the session's cells define takes as its __module__ (borrowed).
  PyObject* own_module_name = nullptr;
  // The session's namespace (borrowed): frames running the cell's own code
  // have it as their globals.
  PyObject* globals = nullptr;
  // A set of weak references to the classes made through type.__new__ while
  // the session's gated cells ran (borrowed).
  PyObject* newborn_classes = nullptr;
};

// nullptr when this thread is not running a gated cell. A plain
// thread_local read: what an ungated store pays.
inline thread_local const GatedCell* current_gated_cell = nullptr;

}  // namespace dolsot
