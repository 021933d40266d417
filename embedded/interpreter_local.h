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
//
// The last interpreter's T is cached (a pointer compare on the cell's path,
// no dict lookup by C string); the capsule's destruction clears the cache, so
// an interpreter restarted at the same address makes its own. Interpreters
// that share one GIL only (the cache is not synchronized otherwise).
//
// `make` false: only look (nullptr, no error, when there is none yet), for
// code that must not make one (a store into a class, which may run while
// the interpreter is being finalized).
template <class T>
T* InterpreterLocal(const char* key, bool make = true) {
  static PyInterpreterState* cached_interpreter = nullptr;
  static T* cached = nullptr;
  PyInterpreterState* interpreter = PyInterpreterState_Get();
  if (cached != nullptr && cached_interpreter == interpreter) return cached;
  PyObject* state = PyInterpreterState_GetDict(interpreter);
  if (state == nullptr) {
    if (make) PyErr_SetString(PyExc_RuntimeError, "no interpreter state dict");
    return nullptr;
  }
  PyObject* capsule = PyDict_GetItemString(state, key);  // borrowed
  if (capsule != nullptr) {
    cached = static_cast<T*>(PyCapsule_GetPointer(capsule, key));
    cached_interpreter = interpreter;
    return cached;
  }
  if (!make) {
    PyErr_Clear();
    return nullptr;
  }
  std::unique_ptr<T> made = T::Create();
  if (made == nullptr) return nullptr;
  PyObject* owner = PyCapsule_New(made.get(), key, [](PyObject* self) {
    T* owned = static_cast<T*>(PyCapsule_GetPointer(self, PyCapsule_GetName(self)));
    if (owned == cached) {
      cached = nullptr;
      cached_interpreter = nullptr;
    }
    delete owned;
  });
  if (owner == nullptr) return nullptr;
  T* kept = made.release();  // the capsule's from here on
  const int stored = PyDict_SetItemString(state, key, owner);
  Py_DECREF(owner);
  if (stored < 0) return nullptr;
  cached = kept;
  cached_interpreter = interpreter;
  return kept;
}

}  // namespace dolsot
