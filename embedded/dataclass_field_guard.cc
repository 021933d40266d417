// The dataclass Field guard (see dataclass_field_guard.h).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "embedded/dataclass_field_guard.h"

#include <memory>
#include <string>

#include "embedded/gated_cell.h"
#include "embedded/gated_code.h"
#include "embedded/interpreter_local.h"
#include "embedded/py_ref.h"
#include "embedded/runtime_finding.h"

namespace dolsot {
namespace {

// True when the store comes from a gated session's own code: its cell's, or
// code of its cells run later (a finalizer, a callback).
bool FromGatedCell() {
  GatedCell scratch;
  const GatedCell* cell = GatedCodeRunning(scratch);
  return cell != nullptr && PyEval_GetGlobals() == cell->globals;
}

int Refuse(PyObject* name, bool store) {
  return RaiseRuntimeFinding(
      PyExc_AttributeError,
      std::string(store ? "assigning into" : "deleting from") +
          " a `dataclasses.Field` (`." + TextOf(name) +
          "`): dataclasses turns a field's name into code; a Field is not the cell's to change");
}

PyObject* FieldSetattr(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "__setattr__ expected 2 arguments");
    return nullptr;
  }
  if (FromGatedCell()) {
    Refuse(args[0], true);
    return nullptr;
  }
  if (PyObject_GenericSetAttr(self, args[0], args[1]) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* FieldDelattr(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 1) {
    PyErr_SetString(PyExc_TypeError, "__delattr__ expected 1 argument");
    return nullptr;
  }
  if (FromGatedCell()) {
    Refuse(args[0], false);
    return nullptr;
  }
  if (PyObject_GenericSetAttr(self, args[0], nullptr) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyMethodDef kSetattrDef = {"__setattr__", reinterpret_cast<PyCFunction>(
                                              reinterpret_cast<void (*)()>(FieldSetattr)),
                           METH_FASTCALL, "refused from a gated cell's own code"};
PyMethodDef kDelattrDef = {"__delattr__", reinterpret_cast<PyCFunction>(
                                              reinterpret_cast<void (*)()>(FieldDelattr)),
                           METH_FASTCALL, "refused from a gated cell's own code"};

struct FieldGuard {
  static std::unique_ptr<FieldGuard> Create() {
    Ref dataclasses(PyImport_ImportModule("dataclasses"));
    Ref field(dataclasses ? PyObject_GetAttrString(dataclasses.get(), "Field") : nullptr);
    if (!field || !PyType_Check(field.get())) return nullptr;
    auto* type = reinterpret_cast<PyTypeObject*>(field.get());
    Ref setattr(PyDescr_NewMethod(type, &kSetattrDef));
    Ref delattr(PyDescr_NewMethod(type, &kDelattrDef));
    if (!setattr || !delattr || PyObject_SetAttrString(field.get(), "__setattr__", setattr.get()) < 0 ||
        PyObject_SetAttrString(field.get(), "__delattr__", delattr.get()) < 0) {
      return nullptr;
    }
    return std::make_unique<FieldGuard>();
  }
};

}  // namespace

Status InstallDataclassFieldGuard() {
  if (InterpreterLocal<FieldGuard>("dolsot.dataclass_field_guard.v1") == nullptr) {
    const std::string error = TextOf(nullptr);
    PyErr_Clear();
    return InternalError("runtime gate: cannot guard dataclasses.Field");
  }
  return Status::Ok();
}

}  // namespace dolsot
