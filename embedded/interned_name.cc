// InternedName (see interned_name.h).
#include <Python.h>

#include "embedded/interned_name.h"

#include <atomic>

#include "embedded/py_ref.h"

namespace dolsot {
namespace {

// Bumped when an interpreter that interned names is finalized: every cached
// pointer is stale from then on (the next get() interns again).
std::atomic<std::uint64_t> generation{1};

constexpr const char* kTableKey = "dolsot.interned_names.v1";

void TableFinalized(PyObject* capsule) {
  generation.fetch_add(1);
  Py_XDECREF(static_cast<PyObject*>(PyCapsule_GetPointer(capsule, kTableKey)));
}

// The interpreter's table of interned names (borrowed), made on first use: a
// dict the interpreter's state dict keeps, inside a capsule whose
// destruction (at finalization) bumps the generation.
PyObject* Table(PyInterpreterState* interpreter) {
  PyObject* state = PyInterpreterState_GetDict(interpreter);
  if (state == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "no interpreter state dict");
    return nullptr;
  }
  PyObject* capsule = PyDict_GetItemString(state, kTableKey);  // borrowed
  if (capsule != nullptr) return static_cast<PyObject*>(PyCapsule_GetPointer(capsule, kTableKey));
  Ref table(PyDict_New());
  if (!table) return nullptr;
  Ref made(PyCapsule_New(table.get(), kTableKey, TableFinalized));
  if (!made) return nullptr;
  PyObject* owned = table.release();  // the capsule's from here on
  if (PyDict_SetItemString(state, kTableKey, made.get()) < 0) return nullptr;
  return owned;
}

}  // namespace

PyObject* InternedName::get() const {
  PyInterpreterState* interpreter = PyInterpreterState_Get();
  const std::uint64_t now = generation.load(std::memory_order_acquire);
  if (str_ != nullptr && interpreter_ == interpreter && generation_ == now) return str_;
  PyObject* table = Table(interpreter);
  if (table == nullptr) return nullptr;
  Ref str(PyUnicode_InternFromString(text_));
  if (!str) return nullptr;
  PyObject* kept = PyDict_SetDefault(table, str.get(), str.get());  // borrowed, the table's
  if (kept == nullptr) return nullptr;
  str_ = kept;
  interpreter_ = interpreter;
  generation_ = now;
  return kept;
}

}  // namespace dolsot
