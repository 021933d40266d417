// Read-only views of a module's tables (dicts, lists, sets, bytearrays,
// deques and other mutable collections a module holds at its top level, like
// `copy.dispatch_table` or `html.entities.html5`): what a gated cell gets
// when it reads one through a module view (embedded/module_view.h).
//
// A view reads through to the table it hides (len, iter, in, [k], get,
// keys/values/items, copy, index/count, ==, repr, bool, the set reads) and
// refuses every change (item store or delete, update, clear, pop, append,
// sort, add, `|=`, `+=`, ...) with a TypeError carrying the
// `module-assignment` finding. A read changes nothing: a defaultdict's
// missing key gives a fresh default that is not stored. What it hands out is guarded the same way:
// a table inside the table is a view, a module a module view; keys(),
// values() and items() are lists, copy() a plain dict, list, set or
// bytearray (whose inner tables are views). It is no dict: `isinstance(v,
// dict)` is false, `dict(v)` or `v.copy()` is a copy to use as one. The
// table itself is unreachable from the view (no attribute exposes it).
//
// Everything here needs the GIL.
#pragma once

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

// True when `value` is a table a gated cell gets only a view of: a dict,
// list, set or bytearray (or a subclass), a deque, or any other instance of
// collections.abc's MutableMapping, MutableSequence or MutableSet that is not
// callable. -1 with a Python error set when that cannot be decided.
int IsModuleTable(PyObject* value);

// A new read-only view of `table` (a new reference; nullptr with a Python
// error set). `label` (e.g. "copy.dispatch_table") names it in messages.
PyObject* TableViewOf(PyObject* table, PyObject* label);

// True for a view made by TableViewOf.
bool IsTableView(PyObject* value);

}  // namespace dolsot
