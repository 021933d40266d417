// FunctionRecipe: a function a cell defined, written as bytes that make the
// same function again in another copy of the session: a promoted snapshot
// binding its runner's binding cells (read_only_cell.h), or a restored
// session reading its journal. It is what lets a cell that defines a
// function (`def f(x): return x * 2`) be a binding cell, with no rollback
// point forked and no checkpoint written at once.
//
// The same function: its code (marshal's copy), name, qualified name,
// defaults and keyword defaults (immutable plain values), doc, module and
// annotations (plain values, builtin types by name, `list[int]`,
// `int | None`), bound in the same namespace (its globals, and through
// them its builtins). Only a function nothing else can tell from its copy
// gets a recipe: an exact function of that namespace, which the namespace
// alone holds (no other name, no weak reference), with no closure, no
// attributes of its own and no type parameters. The recipe carries the
// source of the cell it was defined in, for tracebacks.
//
// Everything here needs the GIL; nothing raises (the error indicator is as
// it was, or clear).
#pragma once

#include <Python.h>

#include <string>
#include <string_view>

namespace dolsot {

class FunctionRecipe {
 public:
  // Runs the glue once per process (ReadOnlyCell::Prepare calls it). False
  // when it cannot: no function then gets a recipe.
  static bool Prepare();

  // Whether letting `value` go runs no code of the session's: an exact
  // function with no closure, no attributes, no weak reference, whose
  // defaults and annotations a recipe could write (plain values).
  static bool Disposable(PyObject* value);

  // Writes `function`, a function `globals` holds, as a recipe into `*out`
  // (counting its defaults against `*budget`, as plain_values.h's checks
  // do). False when it is not one a recipe makes again exactly.
  static bool Write(PyObject* function, PyObject* globals, int* budget, std::string* out);

  // Whether `bytes` is a recipe (else a marshalled plain value: no marshal
  // type code is 0).
  static bool IsRecipe(std::string_view bytes) { return !bytes.empty() && bytes[0] == kTag; }

  // Makes the function of a recipe in `globals`; `*source` gets its cell's
  // source (empty when it had none). A new reference, or nullptr when the
  // bytes are not a recipe this interpreter reads.
  static PyObject* Read(PyObject* globals, std::string_view bytes, std::string* source);

 private:
  static constexpr char kTag = '\0';
};

}  // namespace dolsot
