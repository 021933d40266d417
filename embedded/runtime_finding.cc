// RuntimeFinding (see runtime_finding.h).
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>  // PyFrame_GetBack: in Python.h from 3.11 on
#endif

#include "embedded/runtime_finding.h"

#include <optional>
#include <string>
#include <string_view>

#include "embedded/cell_sources.h"
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

#if PY_VERSION_HEX >= 0x030B0000
// CPython's columns count UTF-8 bytes, the gate's code points: the 1-based
// code-point column of byte `offset` on `line` of the cell's registered
// source, or offset + 1 when the source is not there.
int CodePointColumn(PyCodeObject* code, int line, int offset) {
  const char* filename = PyUnicode_AsUTF8(code->co_filename);
  std::optional<std::string> source =
      filename != nullptr ? RegisteredCellSource(filename) : std::nullopt;
  PyErr_Clear();
  if (!source) return offset + 1;
  std::size_t start = 0;
  for (int i = 1; i < line && start != std::string::npos; ++i) {
    start = source->find('\n', start);
    if (start != std::string::npos) ++start;
  }
  if (start == std::string::npos) return offset + 1;
  int column = 1;
  for (std::size_t i = start; i < source->size() && i < start + offset; ++i) {
    if ((static_cast<unsigned char>((*source)[i]) & 0xC0) != 0x80) ++column;
  }
  return column;
}
#endif

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
    location.column = CodePointColumn(code, start_line, start_column);
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
