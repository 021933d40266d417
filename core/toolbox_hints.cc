// Toolbox hints and toolbox exit codes.
#include "core/toolbox_hints.h"

#include <Python.h>

namespace dolsot {

std::optional<int> ExceptionExitCode(PyObject* exc) {
  if (exc == nullptr) return std::nullopt;
  PyObject* code = PyObject_GetAttrString(exc, "exit_code");
  if (code == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  std::optional<int> out;
  if (PyLong_Check(code) && !PyBool_Check(code)) {
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(code, &overflow);
    if (!overflow && v >= 0 && v <= 255) out = static_cast<int>(v);
  }
  Py_DECREF(code);
  PyErr_Clear();
  return out;
}

std::optional<std::string> ToolboxCallHint(PyObject*, PyObject*, const std::vector<std::string>&) {
  return std::nullopt;  // signature hints: see issue 7
}

}  // namespace dolsot
