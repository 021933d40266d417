// RuntimeFinding (see runtime_finding.h).
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>  // PyFrame_GetBack: in Python.h from 3.11 on
#endif

#include "embedded/runtime_finding.h"

#include <string_view>

#include "embedded/py_ref.h"

namespace dolsot {
namespace {

bool IsCellCode(PyCodeObject* code) {
  const char* name = PyUnicode_Check(code->co_filename) ? PyUnicode_AsUTF8(code->co_filename)
                                                        : nullptr;
  if (name == nullptr) {
    PyErr_Clear();
    return false;
  }
  return std::string_view(name).starts_with("<cell ");
}

struct Location {
  int line = 1;
  int column = 1;
};

Location LocationOf(PyFrameObject* frame) {
  Location location;
  location.line = PyFrame_GetLineNumber(frame);
#if PY_VERSION_HEX >= 0x030B0000
  PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
  int start_line = 0, start_column = 0, end_line = 0, end_column = 0;
  if (PyCode_Addr2Location(code, PyFrame_GetLasti(frame), &start_line, &start_column, &end_line,
                           &end_column) &&
      start_line > 0 && start_column >= 0) {
    location.line = start_line;
    location.column = start_column + 1;
  }
  Py_DECREF(code);
#endif
  return location;
}

}  // namespace

std::string RuntimeFinding(const std::string& message) {
  Location location;
  PyFrameObject* innermost = PyEval_GetFrame();  // borrowed
  if (innermost != nullptr) {
    location = LocationOf(innermost);
    Py_INCREF(innermost);
    Ref frame(reinterpret_cast<PyObject*>(innermost));
    while (frame) {
      auto* f = reinterpret_cast<PyFrameObject*>(frame.get());
      PyCodeObject* code = PyFrame_GetCode(f);  // new reference
      const bool cell = IsCellCode(code);
      Py_DECREF(code);
      if (cell) {
        location = LocationOf(f);
        break;
      }
      frame.reset(reinterpret_cast<PyObject*>(PyFrame_GetBack(f)));  // new reference
    }
  }
  return "line " + std::to_string(location.line) + ", col " + std::to_string(location.column) +
         ": [module-assignment] " + message;
}

int RaiseRuntimeFinding(PyObject* exception_type, const std::string& message) {
  PyErr_SetString(exception_type, RuntimeFinding(message).c_str());
  return -1;
}

std::string TextOf(PyObject* object) {
  if (object == nullptr) return "?";
  Ref str(PyObject_Str(object));
  const char* utf8 = str ? PyUnicode_AsUTF8(str.get()) : nullptr;
  if (utf8 == nullptr) {
    PyErr_Clear();
    return "?";
  }
  return utf8;
}

}  // namespace dolsot
