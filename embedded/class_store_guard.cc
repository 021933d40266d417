// The class-store guard (see class_store_guard.h).
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>  // PyFrame_GetBack, f_globals: in Python.h from 3.11 on
#endif

#include "embedded/class_store_guard.h"

#include <memory>
#include <string>

#include "embedded/gated_cell.h"
#include "embedded/gated_code.h"
#include "embedded/interned_name.h"
#include "embedded/interpreter_local.h"
#include "embedded/py_ref.h"
#include "embedded/runtime_finding.h"

namespace dolsot {
namespace {

// type's own slots, as CPython made them (set once, by the first install).
setattrofunc original_setattro = nullptr;
newfunc original_new = nullptr;

const InternedName kModuleKey("__module__");
const InternedName kCollections("collections");

bool IsOwnClass(const GatedCell& cell, PyObject* type) {
  PyObject* dict = reinterpret_cast<PyTypeObject*>(type)->tp_dict;
  PyObject* key = kModuleKey.get();
  if (dict != nullptr && key != nullptr) {
    PyObject* module = PyDict_GetItemWithError(dict, key);  // borrowed
    if (module != nullptr && module == cell.own_module_name) return true;
  }
  PyErr_Clear();
  if (cell.newborn_classes == nullptr || PySet_GET_SIZE(cell.newborn_classes) == 0) return false;
  Ref ref(PyWeakref_NewRef(type, nullptr));
  if (!ref) {
    PyErr_Clear();
    return false;
  }
  const int contained = PySet_Contains(cell.newborn_classes, ref.get());
  if (contained < 0) PyErr_Clear();
  return contained == 1;
}

// True when a module's top-level code runs between the innermost frame and
// the cell's own code: an import the cell started (`import uuid` the first
// time makes uuid's classes, enum members and all), or a library's lazy
// import. Its stores and classes are the module's, not the cell's. The walk
// stops at the first frame of the cell's own code (its globals are the
// session's namespace), so a cell's function called back from a module's
// top level is still the cell's. A module's top level is a "<module>" code
// whose globals are the dict of the module sys.modules holds under their
// __name__ (code that exec/eval run with other globals is not).
bool InModuleTopLevel(const GatedCell& cell) {
  PyFrameObject* innermost = PyEval_GetFrame();  // borrowed
  if (innermost == nullptr) return false;
  PyObject* modules = PyImport_GetModuleDict();  // borrowed
  Py_INCREF(innermost);
  Ref frame(reinterpret_cast<PyObject*>(innermost));
  while (frame) {
    auto* f = reinterpret_cast<PyFrameObject*>(frame.get());
#if PY_VERSION_HEX >= 0x030B0000
    Ref globals(PyFrame_GetGlobals(f));
#else
    Py_INCREF(f->f_globals);
    Ref globals(f->f_globals);
#endif
    if (globals.get() == cell.globals) return false;
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    const bool top_level = PyUnicode_Check(code->co_name) &&
                           PyUnicode_CompareWithASCIIString(code->co_name, "<module>") == 0;
    Py_DECREF(code);
    if (top_level && globals && PyDict_Check(globals.get())) {
      PyObject* name = PyDict_GetItemString(globals.get(), "__name__");  // borrowed
      PyObject* module = name != nullptr ? PyDict_GetItemWithError(modules, name) : nullptr;
      if (module != nullptr && PyModule_Check(module) &&
          PyModule_GetDict(module) == globals.get()) {
        return true;
      }
      PyErr_Clear();
    }
    frame.reset(reinterpret_cast<PyObject*>(PyFrame_GetBack(f)));  // new reference
  }
  return false;
}

std::string ClassName(PyObject* type) {
  auto* t = reinterpret_cast<PyTypeObject*>(type);
  Ref module(PyObject_GetAttrString(type, "__module__"));
  PyErr_Clear();
  std::string name = t->tp_name;
  if (module && PyUnicode_Check(module.get()) && name.find('.') == std::string::npos) {
    name = TextOf(module.get()) + "." + name;
  }
  return name;
}

int GuardedSetattro(PyObject* type, PyObject* name, PyObject* value) {
  GatedCell scratch;
  const GatedCell* cell = GatedCodeRunning(scratch);
  if (cell != nullptr &&
      !(reinterpret_cast<PyTypeObject*>(type)->tp_flags & Py_TPFLAGS_IMMUTABLETYPE) &&
      !IsOwnClass(*cell, type) && !InModuleTopLevel(*cell)) {
    const std::string class_name = ClassName(type);
    return RaiseRuntimeFinding(
        PyExc_AttributeError,
        std::string(value != nullptr ? "assigning into" : "deleting from") + " class `" +
            class_name + "` (`." + TextOf(name) +
            "`), which this session did not define: a class is shared by every session and "
            "the host");
  }
  return original_setattro(type, name, value);
}

// True when the code calling type.__new__ is the cell's own or
// collections.namedtuple's (which typing.NamedTuple calls too): the classes
// made for the cell. A class a toolbox's function or a library makes while
// the cell calls it is theirs (it may be cached and shared).
bool MadeForTheCell(const GatedCell& cell) {
  PyObject* globals = PyEval_GetGlobals();  // borrowed
  if (globals == nullptr) return false;
  if (globals == cell.globals) return true;
  PyObject* collections = PyImport_GetModule(kCollections.get());  // new reference
  const bool namedtuple = collections != nullptr && PyModule_Check(collections) &&
                          PyModule_GetDict(collections) == globals;
  Py_XDECREF(collections);
  PyErr_Clear();
  return namedtuple;
}

PyObject* GuardedNew(PyTypeObject* metatype, PyObject* args, PyObject* kwargs) {
  PyObject* made = original_new(metatype, args, kwargs);
  const GatedCell* cell = current_gated_cell;
  // Three arguments: type.__new__ made a class (one argument is type(x),
  // which returns an existing one).
  if (made != nullptr && cell != nullptr && cell->newborn_classes != nullptr &&
      PyType_Check(made) && PyTuple_Check(args) && PyTuple_GET_SIZE(args) == 3 &&
      MadeForTheCell(*cell) && !InModuleTopLevel(*cell)) {
    Ref ref(PyWeakref_NewRef(made, nullptr));
    if (!ref || PySet_Add(cell->newborn_classes, ref.get()) < 0) {
      Py_DECREF(made);
      return nullptr;
    }
  }
  return made;
}

// Points `descriptor` (a slot wrapper of type's dict) at the guard.
void PatchWrapper(const char* name) {
  PyObject* dict = PyType_Type.tp_dict;
#if PY_VERSION_HEX >= 0x030C0000
  Ref owned(PyType_GetDict(&PyType_Type));
  dict = owned.get();
#endif
  if (dict == nullptr) return;
  PyObject* descriptor = PyDict_GetItemString(dict, name);  // borrowed
  if (descriptor == nullptr || !PyObject_TypeCheck(descriptor, &PyWrapperDescr_Type)) return;
  auto* wrapper = reinterpret_cast<PyWrapperDescrObject*>(descriptor);
  if (wrapper->d_wrapped == reinterpret_cast<void*>(original_setattro)) {
    wrapper->d_wrapped = reinterpret_cast<void*>(GuardedSetattro);
  }
}

// Every metaclass made before the install copied type's slots: point them at
// the guard too (classes made later inherit the guarded slots).
// `list_subclasses` is type.__subclasses__ (unbound: `type.__subclasses__()`
// would read it off type itself).
Status PatchMetaclasses(PyObject* list_subclasses, PyObject* metatype) {
  auto* t = reinterpret_cast<PyTypeObject*>(metatype);
  if (t->tp_setattro == original_setattro) t->tp_setattro = GuardedSetattro;
  if (t->tp_new == original_new) t->tp_new = GuardedNew;
  Ref subclasses(PyObject_CallOneArg(list_subclasses, metatype));
  if (!subclasses || !PyList_Check(subclasses.get())) {
    Ref error(TakeRaisedException());
    return InternalError("runtime gate: cannot list the metaclasses: " + TextOf(error.get()));
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(subclasses.get()); ++i) {
    DOLSOT_RETURN_IF_ERROR(PatchMetaclasses(list_subclasses, PyList_GET_ITEM(subclasses.get(), i)));
  }
  return Status::Ok();
}

struct InstalledHere {
  static std::unique_ptr<InstalledHere> Create() { return std::make_unique<InstalledHere>(); }
};

}  // namespace

Status InstallClassStoreGuard() {
  PyObject* state = PyInterpreterState_GetDict(PyInterpreterState_Get());
  constexpr const char* kKey = "dolsot.class_store_guard.v1";
  if (state != nullptr && PyDict_GetItemString(state, kKey) != nullptr) return Status::Ok();
  if (original_setattro == nullptr) {
    original_setattro = PyType_Type.tp_setattro;
    original_new = PyType_Type.tp_new;
    PyType_Type.tp_setattro = GuardedSetattro;
    PyType_Type.tp_new = GuardedNew;
  }
  PatchWrapper("__setattr__");
  PatchWrapper("__delattr__");
  PyObject* type = reinterpret_cast<PyObject*>(&PyType_Type);
  Ref list_subclasses(PyObject_GetAttrString(type, "__subclasses__"));
  Status status = list_subclasses ? PatchMetaclasses(list_subclasses.get(), type)
                                  : InternalError("runtime gate: no type.__subclasses__");
  if (!status.ok()) {
    PyErr_Clear();
    return status;
  }
  if (InterpreterLocal<InstalledHere>(kKey) == nullptr) {
    PyErr_Clear();
    return InternalError("runtime gate: cannot record the class-store guard");
  }
  return Status::Ok();
}

}  // namespace dolsot
