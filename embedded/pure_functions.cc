// PureFunctions (see pure_functions.h).
#include "embedded/pure_functions.h"

#include <cstddef>
#include <unordered_map>
#include <utility>

#include "embedded/plain_values.h"

namespace dolsot {
namespace {

constexpr std::size_t kMaxKept = 4096;
constexpr int kMaxDefaultItems = 256;

// code object -> the names its body reads; both strong.
std::unordered_map<PyObject*, PyObject*>* g_kept = nullptr;

void Forget() {
  for (auto& [code, reads] : *g_kept) {
    Py_DECREF(code);
    Py_DECREF(reads);
  }
  g_kept->clear();
}

// Immutable plain values all the way down: None or a tuple of them.
bool ImmutableDefaults(PyObject* defaults) {
  if (defaults == nullptr || defaults == Py_None) return true;
  int budget = kMaxDefaultItems;
  return PyTuple_CheckExact(defaults) && IsImmutable(defaults, &budget);
}

// None, or a dict of str to immutable plain values.
bool ImmutableKeywordDefaults(PyObject* defaults) {
  if (defaults == nullptr || defaults == Py_None) return true;
  if (!PyDict_CheckExact(defaults)) return false;
  int budget = kMaxDefaultItems;
  Py_ssize_t position = 0;
  PyObject *key, *value;  // borrowed
  while (PyDict_Next(defaults, &position, &key, &value)) {
    if (!PyUnicode_CheckExact(key) || !IsImmutable(value, &budget)) return false;
  }
  return true;
}

}  // namespace

void PureFunctions::Register(PyObject* code, PyObject* reads) {
  if (!PyCode_Check(code) || !PyTuple_CheckExact(reads)) return;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(reads); ++i) {
    if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(reads, i))) return;
  }
  if (g_kept == nullptr) g_kept = new std::unordered_map<PyObject*, PyObject*>();  // process-long
  if (g_kept->size() >= kMaxKept && g_kept->find(code) == g_kept->end()) Forget();
  auto [kept, added] = g_kept->try_emplace(code, nullptr);
  if (added) {
    Py_INCREF(code);
  } else {
    Py_DECREF(kept->second);
  }
  kept->second = Py_NewRef(reads);
}

void PureFunctions::Clear() {
  if (g_kept != nullptr) Forget();
}

PyObject* PureFunctions::Reads(PyObject* value, PyObject* globals, PyObject* builtins) {
  if (g_kept == nullptr || !Py_IS_TYPE(value, &PyFunction_Type)) return nullptr;
  auto* function = reinterpret_cast<PyFunctionObject*>(value);
  auto kept = g_kept->find(function->func_code);
  if (kept == g_kept->end()) return nullptr;
  if (function->func_globals != globals || function->func_builtins != builtins ||
      function->func_closure != nullptr || !ImmutableDefaults(function->func_defaults) ||
      !ImmutableKeywordDefaults(function->func_kwdefaults)) {
    return nullptr;
  }
  return kept->second;
}

}  // namespace dolsot
