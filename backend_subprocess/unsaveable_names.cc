// UnsaveableNames: probes the names a cell rebound for what pickle cannot
// save, running no Python code.
#include "backend_subprocess/unsaveable_names.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "backend_subprocess/checkpoint_values.h"
#include "embedded/py_ref.h"

namespace dolsot {

using checkpoint_values::IsDunder;
using checkpoint_values::IsMainDefinition;
using checkpoint_values::PendingIsCannotPickle;
using checkpoint_values::Utf8;

namespace {

// Whether pickling an instance of `type` may run Python code at its top
// level: a Python-level reduction hook (or attribute hook, which the default
// reduction goes through) anywhere in its MRO, or a reducer registered for
// it in copyreg.dispatch_table. Needs the GIL.
bool PicklingRunsPython(PyTypeObject* type) {
  static const char* const kHooks[] = {"__reduce_ex__", "__reduce__", "__getstate__",
                                       "__getnewargs_ex__", "__getnewargs__",
                                       "__getattribute__", "__getattr__"};
  PyObject* mro = type->tp_mro;  // borrowed
  if (mro == nullptr || !PyTuple_Check(mro)) return true;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* base = PyTuple_GET_ITEM(mro, i);
    if (!PyType_Check(base)) return true;
    PyObject* dict = reinterpret_cast<PyTypeObject*>(base)->tp_dict;  // borrowed
    if (dict == nullptr) continue;
    for (const char* hook : kHooks) {
      PyObject* found = PyDict_GetItemString(dict, hook);  // borrowed
      // C slots show as wrapper descriptors; anything else is Python's.
      if (found != nullptr && Py_TYPE(found) != &PyWrapperDescr_Type &&
          Py_TYPE(found) != &PyMethodDescr_Type && !PyCFunction_Check(found)) {
        return true;
      }
    }
  }
  PyObject* copyreg = PyImport_GetModuleDict() != nullptr
                          ? PyDict_GetItemString(PyImport_GetModuleDict(), "copyreg")
                          : nullptr;  // borrowed
  Ref table(copyreg ? PyObject_GetAttrString(copyreg, "dispatch_table") : nullptr);
  const bool registered =
      table && PyDict_Check(table.get()) &&
      PyDict_GetItem(table.get(), reinterpret_cast<PyObject*>(type)) != nullptr;
  PyErr_Clear();
  return registered;
}

}  // namespace

std::vector<std::string> UnsaveableNames::Update(PyObject* globals,
                                                 const std::vector<std::string>& skip,
                                                 std::vector<std::string>* rebound) {
  std::vector<std::string> unsaveable;
  if (globals == nullptr || !PyDict_Check(globals)) return unsaveable;
  std::map<std::string, Seen, std::less<>> now;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  std::vector<std::pair<std::string, PyObject*>> to_probe;
  while (PyDict_Next(globals, &pos, &key, &value)) {
    std::optional<std::string_view> name = Utf8(key);
    if (!name || name->empty() || IsDunder(*name)) continue;
    if (std::find(skip.begin(), skip.end(), *name) != skip.end()) continue;
    const Seen seen{reinterpret_cast<std::uintptr_t>(value),
                    reinterpret_cast<std::uintptr_t>(Py_TYPE(value)), true};
    auto known = seen_.find(*name);
    if (known != seen_.end() && known->second.id == seen.id && known->second.type == seen.type) {
      now.emplace(std::string(*name), known->second);
    } else {
      to_probe.emplace_back(std::string(*name), Py_NewRef(value));
    }
  }
  PyErr_Clear();
  for (auto& [name, held] : to_probe) {
    std::size_t visits = kMaxVisits;
    Seen seen{reinterpret_cast<std::uintptr_t>(held),
              reinterpret_cast<std::uintptr_t>(Py_TYPE(held)), Probe(held, 0, &visits)};
    Py_DECREF(held);
    if (rebound != nullptr) rebound->push_back(name);
    now[name] = seen;
  }
  seen_ = std::move(now);
  for (const auto& [name, seen] : seen_) {
    if (!seen.saveable) unsaveable.push_back(name);
  }
  last_ = unsaveable;
  return unsaveable;
}

void UnsaveableNames::Trust(PyObject* globals, const std::vector<std::string>& names) {
  if (globals == nullptr || !PyDict_Check(globals)) return;
  for (const std::string& name : names) {
    PyObject* value = PyDict_GetItemString(globals, name.c_str());  // borrowed
    if (value == nullptr) continue;
    seen_[name] = Seen{reinterpret_cast<std::uintptr_t>(value),
                       reinterpret_cast<std::uintptr_t>(Py_TYPE(value)), true};
  }
  PyErr_Clear();
  last_.clear();
  for (const auto& [name, seen] : seen_) {
    if (!seen.saveable) last_.push_back(name);
  }
}

bool UnsaveableNames::Probe(PyObject* value, int depth, std::size_t* visits) {
  if (*visits == 0 || depth > 3) return true;  // enough: the checkpoint will tell
  --*visits;
  if (PyModule_Check(value) || IsMainDefinition(value)) return true;
  if (PyLong_CheckExact(value) || PyFloat_CheckExact(value) || PyUnicode_CheckExact(value) ||
      PyBytes_CheckExact(value) || PyByteArray_CheckExact(value) || PyBool_Check(value) ||
      PyComplex_CheckExact(value) || value == Py_None) {
    return true;
  }
  if (PyList_CheckExact(value) || PyTuple_CheckExact(value)) {
    Ref items(PySequence_Fast(value, ""));  // a list or tuple: no code runs
    const Py_ssize_t n = items ? PySequence_Fast_GET_SIZE(items.get()) : 0;
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (!Probe(PySequence_Fast_GET_ITEM(items.get(), i), depth + 1, visits)) return false;
    }
    PyErr_Clear();
    return true;
  }
  if (PyDict_CheckExact(value)) {
    PyObject *key, *item;
    Py_ssize_t pos = 0;
    while (PyDict_Next(value, &pos, &key, &item)) {
      if (!Probe(key, depth + 1, visits) || !Probe(item, depth + 1, visits)) return false;
    }
    return true;
  }
  if (PicklingRunsPython(Py_TYPE(value))) return true;  // left to the checkpoint
  // object.__reduce_ex__(value, 5): C code only, for such a type; it does not
  // descend into the state it returns.
  Ref reduced(PyObject_CallMethod(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__reduce_ex__",
                                  "Oi", value, 5));
  if (reduced) return true;
  const bool unsaveable = PendingIsCannotPickle();
  PyErr_Clear();
  return !unsaveable;
}

}  // namespace dolsot
