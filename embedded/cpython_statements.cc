// CpythonStatementStarts: the statements of a cell as CPython's parser reads
// them (PyCF_ONLY_AST), walked through their statement lists only.
#include "embedded/cpython_statements.h"

#include <Python.h>

#include <algorithm>
#include <string>

namespace dolsot {
namespace {

class GilScope {
 public:
  GilScope() : state_(PyGILState_Ensure()) {}
  ~GilScope() { PyGILState_Release(state_); }
  GilScope(const GilScope&) = delete;
  GilScope& operator=(const GilScope&) = delete;

 private:
  PyGILState_STATE state_;
};

struct Owned {  // a new reference, released at scope exit
  PyObject* ptr;
  explicit Owned(PyObject* p) : ptr(p) {}
  ~Owned() { Py_XDECREF(ptr); }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
};

// The fields of a statement that hold statement lists, and those that hold
// lists of nodes (except handlers, match cases) which hold one in `body`.
constexpr const char* kStatementLists[] = {"body", "orelse", "finalbody"};
constexpr const char* kClauseLists[] = {"handlers", "cases"};

bool ReadInt(PyObject* node, const char* name, std::uint32_t& out) {
  Owned value(PyObject_GetAttrString(node, name));
  if (value.ptr == nullptr) return false;
  long number = PyLong_AsLong(value.ptr);
  if (number < 0 && PyErr_Occurred()) return false;
  out = static_cast<std::uint32_t>(std::max(0L, number));
  return true;
}

// Appends the statements of list `field` of `node` (absent: nothing).
bool WalkList(PyObject* node, const char* field, bool clauses, int depth,
              std::vector<CpythonStatementStart>& out);

bool WalkStatement(PyObject* statement, int depth, std::vector<CpythonStatementStart>& out) {
  CpythonStatementStart start;
  if (!ReadInt(statement, "lineno", start.line) || !ReadInt(statement, "col_offset", start.column)) {
    return false;
  }
  out.push_back(start);
  for (const char* field : kStatementLists) {
    if (!WalkList(statement, field, false, depth + 1, out)) return false;
  }
  for (const char* field : kClauseLists) {
    if (!WalkList(statement, field, true, depth + 1, out)) return false;
  }
  return true;
}

bool WalkList(PyObject* node, const char* field, bool clauses, int depth,
              std::vector<CpythonStatementStart>& out) {
  if (depth > 1000) {  // CPython's parser nests far less deeply
    PyErr_SetString(PyExc_RecursionError, "statements nested too deeply");
    return false;
  }
  Owned list(PyObject_GetAttrString(node, field));
  if (list.ptr == nullptr) {
    PyErr_Clear();  // this kind of node has no such field
    return true;
  }
  if (!PyList_Check(list.ptr)) return true;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list.ptr); ++i) {
    PyObject* item = PyList_GET_ITEM(list.ptr, i);  // borrowed
    bool ok = clauses ? WalkList(item, "body", false, depth + 1, out)
                      : WalkStatement(item, depth, out);
    if (!ok) return false;
  }
  return true;
}

// The pending Python error as "Type: message", cleared.
std::string TakeError() {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  std::string text = type != nullptr ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "error";
  if (value != nullptr) {
    Owned message(PyObject_Str(value));
    const char* utf8 = message.ptr != nullptr ? PyUnicode_AsUTF8(message.ptr) : nullptr;
    if (utf8 != nullptr) text += std::string(": ") + utf8;
    PyErr_Clear();
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  return text;
}

}  // namespace

StatusOr<std::vector<CpythonStatementStart>> CpythonStatementStarts(std::string_view code) {
  if (!Py_IsInitialized()) {
    return Status(ErrorCode::kUnavailable, "no Python interpreter runs in this process");
  }
  GilScope gil;
  std::string source(code);  // NUL-terminated (the gate has refused NUL bytes)
  PyCompilerFlags flags = _PyCompilerFlags_INIT;
  flags.cf_flags = PyCF_ONLY_AST | PyCF_IGNORE_COOKIE;
  Owned module(Py_CompileStringExFlags(source.c_str(), "<cell>", Py_file_input, &flags, -1));
  if (module.ptr == nullptr) return InvalidArgument(TakeError());
  std::vector<CpythonStatementStart> starts;
  if (!WalkList(module.ptr, "body", false, 0, starts)) return InvalidArgument(TakeError());
  std::sort(starts.begin(), starts.end(), [](const auto& a, const auto& b) {
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  });
  return starts;
}

}  // namespace dolsot
