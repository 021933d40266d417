// PureFunctions: the functions of a session whose bodies the binding proof
// (read_only_cell.h) walked when their def ran and found made only of what
// a binding cell may do: they bind only their own locals, call only what
// they read, reach attributes only to call the methods the proof allows,
// and return. What such a body reads from its globals is kept with its
// code; a cell that calls the function is proven by proving those reads,
// as they are when it runs (PureFunctions::Reads), so `def f(x): return x
// * 2` once and `f(20)` after are binding (here read-only) cells.
//
// Kept per process, by code object (a strong reference: its address is
// never reused while kept), at most 4096 (then forgotten and proven again
// from the next defs); a fork inherits them. Everything here needs the GIL.
#pragma once

#include <Python.h>

namespace dolsot {

class PureFunctions {
 public:
  // Records `code`'s proven body and the names it reads (a tuple of str).
  static void Register(PyObject* code, PyObject* reads);

  // The names `value` reads from its globals (borrowed, alive while
  // registered), when it is a function whose code was registered and that
  // still is as proven: an exact function of `globals` whose builtins are
  // `builtins`, with no closure, and immutable plain defaults and keyword
  // defaults (a mutable default would change under the proof's eyes).
  // Else nullptr. Never raises.
  static PyObject* Reads(PyObject* value, PyObject* globals, PyObject* builtins);

  // Forgets every registered body (a runner made a new session again in
  // place: the last session's functions are gone, and their code with them).
  static void Clear();
};

}  // namespace dolsot
