// The worker's pages, shared ahead (see shared_heap.h).
#include <Python.h>

#include "backend_subprocess/shared_heap.h"

namespace dolsot {

void SharePagesAhead() {
  PyObject* dill = PyImport_ImportModule("dill");
  if (dill == nullptr) PyErr_Clear();
  Py_XDECREF(dill);
  // Last: what the import made is frozen too.
  PyObject* gc = PyImport_ImportModule("gc");
  PyObject* frozen = gc != nullptr ? PyObject_CallMethod(gc, "freeze", nullptr) : nullptr;
  if (frozen == nullptr) PyErr_Clear();
  Py_XDECREF(frozen);
  Py_XDECREF(gc);
}

}  // namespace dolsot
