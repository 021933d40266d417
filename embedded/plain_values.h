// Plain values: the exact builtin values the cell proofs (read_only_cell.h)
// reason about, because reading, hashing, comparing or copying them runs no
// code of the session's. Each check walks at most `*budget` items (it counts
// down; a value past it is refused), so a proof costs what the values it
// reads hold, bounded.
//
// Everything here needs the GIL.
#pragma once

#include <Python.h>

namespace dolsot {

// An exact builtin value whose reading runs no Python code, all the way
// down: None, bool, int, float, complex, str, bytes, range, and tuples,
// frozensets, lists, dicts, sets and bytearrays of such values. No set
// here has a weak reference (whose callback would run when it goes).
bool IsAtom(PyObject* value, int* budget);

// An exact builtin value no operation can change in place, all the way
// down: None, bool, int, float, complex, str, bytes, and tuples of them.
bool IsImmutable(PyObject* value, int* budget);

// An exact builtin value the C pickler writes by itself at protocol 5, all
// the way down: None, bool, int, float, str, bytes, bytearray, and tuples,
// lists, dicts, sets and frozensets of them. For these it looks nothing up
// (no dispatch table, copyreg or __reduce_ex__, which a session can
// change: complex and range go through them), so pickling one runs no code
// of the session's.
bool PicklesByItself(PyObject* value, int* budget);

// Whether a copy of `value` (marshal's) is as good as the value itself: an
// exact builtin value marshal writes exactly, whose mutable parts (lists,
// dicts, sets, and the tuples holding them) no other object holds (their
// reference count is their one owner's) and no weak reference watches.
// kImmutable when it has no mutable part at all.
enum class Owned { kNo, kImmutable, kMutable };
Owned OwnedPlain(PyObject* value, int* budget);

}  // namespace dolsot
