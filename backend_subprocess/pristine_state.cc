// PristineState (see pristine_state.h).
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "backend_subprocess/pristine_state.h"

#include "embedded/cell_sources.h"

namespace dolsot {
namespace {

Py_ssize_t ModuleCount() {
  PyObject* modules = PyImport_GetModuleDict();  // borrowed
  return modules != nullptr && PyDict_Check(modules) ? PyDict_Size(modules) : -1;
}

// Whether `dict` holds exactly `pristine`'s keys, in its order, each bound
// to the very object `pristine` holds.
bool SameAs(PyObject* dict, PyObject* pristine) {
  if (PyDict_Size(dict) != PyDict_Size(pristine)) return false;
  Py_ssize_t at = 0, pristine_at = 0;
  PyObject *key, *value, *pristine_key, *pristine_value;  // borrowed
  while (PyDict_Next(dict, &at, &key, &value)) {
    if (!PyDict_Next(pristine, &pristine_at, &pristine_key, &pristine_value)) return false;
    if (key != pristine_key || value != pristine_value) return false;
  }
  return true;
}

// Puts `dict` back to `pristine` (see SameAs). Names `pristine` lacks go
// first and names whose object changed get it back, one at a time, so the
// dict holds every other name meanwhile (letting a value go may run its
// finalizer, which may read the builtins); then, when the order still
// differs, the dict is refilled from `pristine`, which by then holds every
// value it lets go. False when an operation fails (no memory).
bool PutBack(PyObject* dict, PyObject* pristine) {
  if (SameAs(dict, pristine)) return true;
  Ref extra(PyList_New(0));
  if (!extra) return false;
  Py_ssize_t at = 0;
  PyObject *key, *value;  // borrowed
  while (PyDict_Next(dict, &at, &key, &value)) {
    PyObject* kept = PyDict_GetItemWithError(pristine, key);  // borrowed
    if (kept == nullptr && (PyErr_Occurred() || PyList_Append(extra.get(), key) < 0)) return false;
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(extra.get()); ++i) {
    if (PyDict_DelItem(dict, PyList_GET_ITEM(extra.get(), i)) < 0) PyErr_Clear();
  }
  at = 0;
  while (PyDict_Next(pristine, &at, &key, &value)) {
    PyObject* now = PyDict_GetItemWithError(dict, key);  // borrowed
    if (now == nullptr && PyErr_Occurred()) return false;
    if (now != value && PyDict_SetItem(dict, key, value) < 0) return false;
  }
  if (SameAs(dict, pristine)) return true;
  PyDict_Clear(dict);
  return PyDict_Update(dict, pristine) == 0 && SameAs(dict, pristine);
}

// The names `dict` holds and the objects they are bound to, in order, as
// one number (their addresses mixed, FNV-1a style), with the count in it.
// Read only: no reference is taken, so the pages the objects live on stay
// shared with the worker (a copy of the builtins' dict took one of each of
// ~160 objects, ~0.06 MB of pages per session).
std::uint64_t Fingerprint(PyObject* dict) {
  std::uint64_t mixed = 0xcbf29ce484222325ull ^ static_cast<std::uint64_t>(PyDict_Size(dict));
  Py_ssize_t at = 0;
  PyObject *key, *value;  // borrowed
  while (PyDict_Next(dict, &at, &key, &value)) {
    for (PyObject* object : {key, value}) {
      mixed ^= static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(object));
      mixed *= 0x100000001b3ull;
    }
  }
  return mixed;
}

// Whether `value` is a mutable container of the kinds a namespace holds.
bool MutableContainer(PyObject* value) {
  return PyDict_CheckExact(value) || PyList_CheckExact(value) || PySet_CheckExact(value) ||
         PyByteArray_CheckExact(value);
}

// Adds `dict`'s values that are mutable containers to `*empty`; false when
// one is not empty.
bool NoteEmptyContainers(PyObject* dict, std::vector<Ref>* empty) {
  Py_ssize_t at = 0;
  PyObject *key, *value;  // borrowed
  while (PyDict_Next(dict, &at, &key, &value)) {
    if (!MutableContainer(value)) continue;
    if (PyObject_Length(value) != 0) return false;
    empty->emplace_back(Py_NewRef(value));
  }
  return true;
}

}  // namespace

void PristineState::Note(PyObject* globals, PyObject* builtins, std::uint64_t cells_run) {
  Forget();
  const CellSourceDicts sources = RegisteredSourceDicts();
  std::vector<Noted> dicts;
  std::vector<Ref> empty;
  for (PyObject* dict : {globals, sources.waiting, sources.linecache}) {
    if (dict == nullptr) continue;
    Ref copy(PyDict_Check(dict) ? PyDict_Copy(dict) : nullptr);
    if (!copy) {
      PyErr_Clear();
      return;
    }
    dicts.push_back({Ref(Py_NewRef(dict)), std::move(copy)});
  }
  if (!PyDict_Check(builtins) || !NoteEmptyContainers(globals, &empty) ||
      !NoteEmptyContainers(builtins, &empty)) {
    return;
  }
  const Py_ssize_t modules = ModuleCount();
  if (modules < 0) return;
  dicts_ = std::move(dicts);
  builtins_ = Ref(Py_NewRef(builtins));
  builtins_fingerprint_ = Fingerprint(builtins);
  empty_ = std::move(empty);
  modules_ = modules;
  cells_run_ = cells_run;
}

void PristineState::Forget() {
  dicts_.clear();
  builtins_.reset(nullptr);
  empty_.clear();
  modules_ = -1;
}

bool PristineState::Restore() {
  if (!held()) return false;
  // A module imported since (a proven cell imports none; formatting a
  // traceback may): the interpreter is not as the snapshot holds it. Nor
  // is it when a container it held empty is not (`__annotations__`, which
  // a binding cell may fill through a subscript).
  if (ModuleCount() != modules_) return false;
  // Nor when the builtins changed (a proven cell cannot; the host's tools
  // are bound there, whose runner is never asked): refused, not put back.
  if (Fingerprint(builtins_.get()) != builtins_fingerprint_) return false;
  for (const Ref& container : empty_) {
    if (PyObject_Length(container.get()) != 0) return false;
  }
  FlushPendingSources();  // as Note saw them: linecache's, once loaded
  for (const Noted& noted : dicts_) {
    if (!PutBack(noted.dict.get(), noted.copy.get())) {
      PyErr_Clear();
      return false;
    }
  }
  return true;
}

}  // namespace dolsot
