// GatedSession (see gated_session.h).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "embedded/gated_session.h"

#include "embedded/class_store_guard.h"
#include "embedded/dataclass_field_guard.h"
#include "embedded/module_view.h"
#include "embedded/py_ref.h"
#include "embedded/runtime_finding.h"

namespace dolsot {

Status InstallRuntimeGuard() {
  Ref import(GuardedImport());  // the views' types first: the class-store guard asks for them
  if (!import) {
    PyErr_Clear();
    return InternalError("runtime gate: cannot make the module views");
  }
  DOLSOT_RETURN_IF_ERROR(InstallClassStoreGuard());
  return InstallDataclassFieldGuard();
}

StatusOr<std::unique_ptr<GatedSession>> GatedSession::Create(PyObject* globals,
                                                             PyObject* builtins) {
  DOLSOT_RETURN_IF_ERROR(InstallRuntimeGuard());
  std::unique_ptr<GatedSession> session(new GatedSession());
  // A str of its own, never interned: only this session's class statements
  // (which read __name__ from the builtins: a namespace has none) get it.
  Ref own_name(PyUnicode_FromStringAndSize("builtins", 8));
  Ref newborn(PySet_New(nullptr));
  Ref import(GuardedImport());
  if (!own_name || !newborn || !import ||
      PyDict_SetItemString(builtins, "__name__", own_name.get()) < 0 ||
      PyDict_SetItemString(builtins, "__import__", import.get()) < 0) {
    const std::string error = TextOf(nullptr);
    PyErr_Clear();
    return InternalError("runtime gate: cannot prepare the session's builtins");
  }
  session->cell_.own_module_name = own_name.release();
  session->cell_.newborn_classes = newborn.release();
  session->cell_.globals = globals;
  return session;
}

GatedSession::~GatedSession() {
  if (!Py_IsInitialized()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_XDECREF(cell_.own_module_name);
  Py_XDECREF(cell_.newborn_classes);
  PyGILState_Release(gil);
}

PyObject* GatedSession::Bind(PyObject* object) {
  return PyModule_Check(object) ? ModuleViewOf(object) : Py_NewRef(object);
}

// Drops the references to classes that died, once the set has doubled.
void GatedSession::PruneNewborn() {
  PyObject* set = cell_.newborn_classes;
  if (PySet_GET_SIZE(set) < next_prune_) return;
  Ref kept(PySet_New(nullptr));
  Ref iterator(PyObject_GetIter(set));
  if (!kept || !iterator) {
    PyErr_Clear();
    return;
  }
  while (Ref ref{PyIter_Next(iterator.get())}) {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject* referent = nullptr;
    const bool alive = PyWeakref_GetRef(ref.get(), &referent) == 1;
    Py_XDECREF(referent);
#else
    const bool alive = PyWeakref_GetObject(ref.get()) != Py_None;
#endif
    if (alive) PySet_Add(kept.get(), ref.get());
  }
  PyErr_Clear();
  if (PySet_Clear(set) == 0) {
    Ref merged(PyObject_CallMethod(set, "update", "O", kept.get()));
  }
  PyErr_Clear();
  next_prune_ = 2 * PySet_GET_SIZE(set) + 64;
}

GatedSession::CellScope::CellScope(GatedSession* session) : session_(session) {
  if (session_ == nullptr) return;
  outer_ = current_gated_cell;
  current_gated_cell = &session_->cell_;
}

GatedSession::CellScope::~CellScope() {
  if (session_ == nullptr) return;
  current_gated_cell = outer_;
  session_->PruneNewborn();
}

}  // namespace dolsot
