// The worker's pages, shared ahead (see shared_heap.h).
#include <Python.h>

#include "backend_subprocess/shared_heap.h"

#include <initializer_list>

namespace dolsot {

namespace {

void Freeze() {
  PyObject* gc = PyImport_ImportModule("gc");
  PyObject* frozen = gc != nullptr ? PyObject_CallMethod(gc, "freeze", nullptr) : nullptr;
  if (frozen == nullptr) PyErr_Clear();
  Py_XDECREF(frozen);
  Py_XDECREF(gc);
}

}  // namespace

void PreloadCommonModules() {
  for (const char* name : {"pickle", "traceback"}) {
    PyObject* module = PyImport_ImportModule(name);
    if (module == nullptr) PyErr_Clear();
    Py_XDECREF(module);
  }
  // One traceback formatted as a cell's is (cell_runner.cc): what that
  // imports on first use (linecache's tokenize) is imported here, and its
  // code is specialized here, once, not in each session's first error.
  PyObject* scope = PyDict_New();
  PyObject* builtins = PyImport_ImportModule("builtins");
  if (scope != nullptr && builtins != nullptr &&
      PyDict_SetItemString(scope, "__builtins__", builtins) == 0) {
    PyObject* done = PyRun_String(
        "import traceback\n"
        "try:\n    undefined_name\n"
        "except NameError as error:\n    traceback.format_exception(error)\n",
        Py_file_input, scope, scope);
    Py_XDECREF(done);
  }
  PyErr_Clear();
  Py_XDECREF(builtins);
  Py_XDECREF(scope);
  Freeze();
}

void SharePagesAhead() {
  PyObject* dill = PyImport_ImportModule("dill");
  if (dill == nullptr) PyErr_Clear();
  Py_XDECREF(dill);
  Freeze();  // last: what the import made is frozen too
}

}  // namespace dolsot
