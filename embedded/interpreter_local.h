// InterpreterLocal<T>: one T per running interpreter, made on first use and
// destroyed with the interpreter (a capsule in its state dict owns it), for
// what the runtime guard keeps per interpreter (its types, its caches). A
// restarted interpreter makes its own. Include after <Python.h>; needs the GIL.
#pragma once

#ifndef Py_PYTHON_H
#error "include <Python.h> before embedded/interpreter_local.h"
#endif

#include <memory>

namespace dolsot {

// T must have `static std::unique_ptr<T> Create()` (nullptr with a Python
// error set on failure) and a destructor that may touch Python (it runs
// while the interpreter is finalized, holding the GIL).
template <class T>
T* InterpreterLocal(const char* key) {
  PyObject* state = PyInterpreterState_GetDict(PyInterpreterState_Get());
  if (state == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "no interpreter state dict");
    return nullptr;
  }
  PyObject* capsule = PyDict_GetItemString(state, key);  // borrowed
  if (capsule != nullptr) return static_cast<T*>(PyCapsule_GetPointer(capsule, key));
  std::unique_ptr<T> made = T::Create();
  if (made == nullptr) return nullptr;
  PyObject* owner = PyCapsule_New(made.get(), key, [](PyObject* self) {
    delete static_cast<T*>(PyCapsule_GetPointer(self, PyCapsule_GetName(self)));
  });
  if (owner == nullptr) return nullptr;
  T* kept = made.release();  // the capsule's from here on
  const int stored = PyDict_SetItemString(state, key, owner);
  Py_DECREF(owner);
  return stored < 0 ? nullptr : kept;
}

}  // namespace dolsot
