// Plain values (see plain_values.h).
#include "embedded/plain_values.h"

#include "embedded/py_ref.h"

namespace dolsot {
namespace {

// Whether `check(member, budget)` holds for every member of a set or
// frozenset (of atoms: iterating it runs no code of the session's).
template <typename Check>
bool EveryMember(PyObject* set, int* budget, Check check) {
  if (PySet_GET_SIZE(set) > *budget) return false;
  Ref items(PySequence_Tuple(set));
  if (!items) {
    PyErr_Clear();
    return false;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items.get()); ++i) {
    if (!check(PyTuple_GET_ITEM(items.get(), i), budget)) return false;
  }
  return true;
}

// Whether `leaf(v)` holds for every value `value` holds through exact
// tuples, lists, dicts (keys and values), sets and frozensets, all the way
// down (within `budget` items), `value` itself included when it is none of
// those. A set a weak reference watches is refused: its callback would run
// code of the session's when it goes.
template <typename Leaf>
bool EveryLeaf(PyObject* value, int* budget, Leaf leaf) {
  if (--*budget < 0) return false;
  auto every = [budget, leaf](PyObject* item, int*) { return EveryLeaf(item, budget, leaf); };
  if (PyTuple_CheckExact(value)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); ++i) {
      if (!EveryLeaf(PyTuple_GET_ITEM(value, i), budget, leaf)) return false;
    }
    return true;
  }
  if (PyList_CheckExact(value)) {
    // Mutable, but only through attributes, stores and `+=`: reading it
    // runs no code of the session's.
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); ++i) {
      if (!EveryLeaf(PyList_GET_ITEM(value, i), budget, leaf)) return false;
    }
    return true;
  }
  if (PyDict_CheckExact(value)) {
    if (PyDict_GET_SIZE(value) > *budget) return false;
    Py_ssize_t position = 0;
    PyObject *key, *item;  // borrowed
    while (PyDict_Next(value, &position, &key, &item)) {
      if (!EveryLeaf(key, budget, leaf) || !EveryLeaf(item, budget, leaf)) return false;
    }
    return true;
  }
  if (PyFrozenSet_CheckExact(value) || PyAnySet_CheckExact(value)) {
    if (reinterpret_cast<PySetObject*>(value)->weakreflist != nullptr) return false;
    return EveryMember(value, budget, every);
  }
  return leaf(value);
}

}  // namespace

// An exact builtin value whose reading runs no Python code, all the way
// down (within `budget` items): immutable atoms, and tuples, frozensets,
// lists, dicts, sets and bytearrays of them.
bool IsAtom(PyObject* value, int* budget) {
  return EveryLeaf(value, budget, [](PyObject* v) {
    return v == Py_None || PyBool_Check(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) ||
           PyComplex_CheckExact(v) || PyUnicode_CheckExact(v) || PyBytes_CheckExact(v) ||
           Py_IS_TYPE(v, &PyRange_Type) || PyByteArray_CheckExact(v);
  });
}

// An exact builtin value _pickle's save() writes on its own paths, all the
// way down (within `budget` items): complex and range are not among them.
bool PicklesByItself(PyObject* value, int* budget) {
  return EveryLeaf(value, budget, [](PyObject* v) {
    return v == Py_None || PyBool_Check(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) ||
           PyUnicode_CheckExact(v) || PyBytes_CheckExact(v) || PyByteArray_CheckExact(v);
  });
}

// An exact builtin value no operation can change in place, all the way down
// (within `budget` items): what `name op= ...` may start from without
// touching anything but the name.
bool IsImmutable(PyObject* value, int* budget) {
  if (--*budget < 0) return false;
  if (value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) ||
      PyFloat_CheckExact(value) || PyComplex_CheckExact(value) || PyUnicode_CheckExact(value) ||
      PyBytes_CheckExact(value)) {
    return true;
  }
  if (PyTuple_CheckExact(value)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); ++i) {
      if (!IsImmutable(PyTuple_GET_ITEM(value, i), budget)) return false;
    }
    return true;
  }
  return false;
}

Owned OwnedPlain(PyObject* value, int* budget) {
  if (--*budget < 0) return Owned::kNo;
  if (value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) ||
      PyFloat_CheckExact(value) || PyComplex_CheckExact(value) || PyUnicode_CheckExact(value) ||
      PyBytes_CheckExact(value)) {
    return Owned::kImmutable;
  }
  if (PyFrozenSet_CheckExact(value)) {
    return EveryMember(value, budget, IsImmutable) ? Owned::kImmutable : Owned::kNo;
  }
  const bool single_owner = Py_REFCNT(value) == 1;
  if (PyTuple_CheckExact(value)) {
    Owned owned = Owned::kImmutable;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); ++i) {
      Owned item = OwnedPlain(PyTuple_GET_ITEM(value, i), budget);
      if (item == Owned::kNo) return Owned::kNo;
      if (item == Owned::kMutable) owned = Owned::kMutable;
    }
    return owned == Owned::kMutable && !single_owner ? Owned::kNo : owned;
  }
  if (!single_owner) return Owned::kNo;
  if (PyList_CheckExact(value)) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); ++i) {
      if (OwnedPlain(PyList_GET_ITEM(value, i), budget) == Owned::kNo) return Owned::kNo;
    }
    return Owned::kMutable;
  }
  if (PyDict_CheckExact(value)) {
    if (PyDict_GET_SIZE(value) > *budget) return Owned::kNo;
    Py_ssize_t position = 0;
    PyObject *key, *item;  // borrowed
    while (PyDict_Next(value, &position, &key, &item)) {
      if (!IsImmutable(key, budget) || OwnedPlain(item, budget) == Owned::kNo) return Owned::kNo;
    }
    return Owned::kMutable;
  }
  if (PyAnySet_CheckExact(value)) {
    // A weak reference to it (a WeakSet's, a WeakValueDictionary's) would
    // see the set a copy replaces go.
    if (reinterpret_cast<PySetObject*>(value)->weakreflist != nullptr) return Owned::kNo;
    return EveryMember(value, budget, IsImmutable) ? Owned::kMutable : Owned::kNo;
  }
  return Owned::kNo;
}

}  // namespace dolsot
