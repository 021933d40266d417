// Module views: what a gated session holds instead of a module. A view is an
// instance of a ModuleType subclass (so `isinstance(v, types.ModuleType)`
// holds) that reads through to the module it hides and refuses every store
// and delete with an AttributeError carrying the `module-assignment` finding.
// One view per module (`json is json` across cells and sessions); the module
// itself is in a C field that no attribute exposes.
//
// A read through a view is guarded (GuardModuleValue): a module comes back as
// its view, a table (embedded/table_view.h) as a read-only view, anything else
// as itself. A gated session's `__import__` (GuardedImport) returns views, so
// `import m`, `import a.b`, `from m import x` and `from a import b` all bind
// guarded values.
//
// Everything here needs the GIL.
#pragma once

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

// The view of `module` (a new reference; nullptr with a Python error set).
PyObject* ModuleViewOf(PyObject* module);

// What a gated cell gets for `value` (borrowed): its module view, a read-only
// view of a table, or the value itself (a new reference; nullptr with a
// Python error set). `label` (a str, or nullptr) names where it was read,
// for the messages of a table view.
PyObject* GuardModuleValue(PyObject* value, PyObject* label);

// The `__import__` a gated session's builtins hold: the interpreter's own
// import, its result guarded (a new reference).
PyObject* GuardedImport();

// True when `function` is the guarded import (GuardedImport's object);
// false, with no error, when no view was made in this interpreter yet.
bool IsGuardedImport(PyObject* function);

// True for a view made by ModuleViewOf.
bool IsModuleView(PyObject* value);

}  // namespace dolsot
