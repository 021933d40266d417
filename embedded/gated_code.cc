// GatedCodeRunning (see gated_code.h).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "embedded/gated_code.h"

#include "embedded/interned_name.h"
#include "embedded/module_view.h"

namespace dolsot {
namespace {

const InternedName kBuiltinsKey("__builtins__");
const InternedName kImportKey("__import__");
const InternedName kNameKey("__name__");

// A borrowed value of `dict` (nullptr, no error, when absent or on error).
PyObject* Lookup(PyObject* dict, const InternedName& key) {
  PyObject* name = key.get();
  PyObject* value = name != nullptr ? PyDict_GetItemWithError(dict, name) : nullptr;
  if (value == nullptr) PyErr_Clear();
  return value;
}

}  // namespace

const GatedCell* GatedCodeRunning(GatedCell& scratch) {
  if (current_gated_cell != nullptr) return current_gated_cell;
  PyObject* globals = PyEval_GetGlobals();  // borrowed
  if (globals == nullptr || !PyDict_Check(globals)) return nullptr;
  PyObject* builtins = Lookup(globals, kBuiltinsKey);
  if (builtins == nullptr || !PyDict_Check(builtins)) return nullptr;
  PyObject* import = Lookup(builtins, kImportKey);
  if (import == nullptr || !IsGuardedImport(import)) return nullptr;
  scratch.own_module_name = Lookup(builtins, kNameKey);
  scratch.globals = globals;
  scratch.newborn_classes = nullptr;
  return &scratch;
}

}  // namespace dolsot
