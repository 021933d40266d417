// ModuleView (see module_view.h): a heap subtype of ModuleType made per
// interpreter, whose instances carry the hidden module after ModuleType's
// own fields (so ModuleType's C code keeps working on a view: it has its own
// small md_dict holding just its name).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "embedded/module_view.h"

#include <memory>
#include <string>
#include <string_view>

#include "embedded/interned_name.h"
#include "embedded/interpreter_local.h"
#include "embedded/py_ref.h"
#include "embedded/runtime_finding.h"
#include "embedded/table_view.h"

namespace dolsot {
namespace {

// Dunder attributes a view reads off its module (module data); every other
// dunder is the view's own (its type's methods: __repr__, __dir__, ...), so no
// bound method of the module itself (module.__setattr__) is handed out, and
// neither is its __spec__ or __loader__ (a loader's load_module() returns the
// module itself): the view's own are None.
constexpr std::string_view kModuleDataDunders[] = {
    "__all__", "__doc__", "__file__", "__name__", "__package__", "__path__", "__version__"};

struct ModuleViews {
  Ref type;
  Ref cache;  // {module: view}
  Ref import_function;
  static std::unique_ptr<ModuleViews> Create();
};

constexpr const char* kViewsKey = "dolsot.module_view.v1";
ModuleViews* Views() { return InterpreterLocal<ModuleViews>(kViewsKey); }

// Where the hidden module sits in a view: after ModuleType's fields.
Py_ssize_t ModuleOffset() { return PyModule_Type.tp_basicsize; }
PyObject*& HiddenModule(PyObject* view) {
  return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(view) + ModuleOffset());
}

std::string ModuleName(PyObject* view) {
  PyObject* module = HiddenModule(view);
  if (module == nullptr) return "?";
  Ref name(PyModule_GetNameObject(module));
  if (!name) PyErr_Clear();
  return TextOf(name.get());
}

bool IsDunder(PyObject* name) {
  if (!PyUnicode_Check(name)) return false;
  const Py_ssize_t length = PyUnicode_GET_LENGTH(name);
  if (length < 5) return false;
  const int kind = PyUnicode_KIND(name);
  const void* data = PyUnicode_DATA(name);
  return PyUnicode_READ(kind, data, 0) == '_' && PyUnicode_READ(kind, data, 1) == '_' &&
         PyUnicode_READ(kind, data, length - 1) == '_' &&
         PyUnicode_READ(kind, data, length - 2) == '_';
}

bool IsModuleData(PyObject* name) {
  const char* text = PyUnicode_AsUTF8(name);
  if (text == nullptr) {
    PyErr_Clear();
    return false;
  }
  for (std::string_view data : kModuleDataDunders) {
    if (data == text) return true;
  }
  return false;
}

// ---- slots -----------------------------------------------------------------

PyObject* ViewGetattro(PyObject* self, PyObject* name) {
  PyObject* module = HiddenModule(self);
  if (module == nullptr || (IsDunder(name) && !IsModuleData(name))) {
    return PyObject_GenericGetAttr(self, name);
  }
  Ref value(PyObject_GetAttr(module, name));
  if (!value) return nullptr;
  if (PyModule_Check(value.get())) return ModuleViewOf(value.get());
  const int table = IsModuleTable(value.get());
  if (table <= 0) return table < 0 ? nullptr : value.release();  // most reads: as they are
  Ref label(PyUnicode_FromFormat("%s.%U", ModuleName(self).c_str(), name));
  return label ? TableViewOf(value.get(), label.get()) : nullptr;
}

int ViewSetattro(PyObject* self, PyObject* name, PyObject* value) {
  const std::string module = ModuleName(self);
  const std::string attribute = TextOf(name);
  return RaiseRuntimeFinding(
      PyExc_AttributeError,
      std::string(value != nullptr ? "assigning into" : "deleting from") + " module `" + module +
          "` (`" + module + "." + attribute + "`): a module is shared by every session and the "
          "host");
}

PyObject* ViewRepr(PyObject* self) {
  PyObject* module = HiddenModule(self);
  return module != nullptr ? PyObject_Repr(module) : PyUnicode_FromString("<module view>");
}

int ViewTraverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(HiddenModule(self));
  return PyModule_Type.tp_traverse(self, visit, arg);
}

int ViewClear(PyObject* self) {
  Py_CLEAR(HiddenModule(self));
  return PyModule_Type.tp_clear != nullptr ? PyModule_Type.tp_clear(self) : 0;
}

void ViewDealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  Py_CLEAR(HiddenModule(self));
  PyModule_Type.tp_dealloc(self);  // frees through type->tp_free
  Py_DECREF(type);
}

PyObject* ViewDir(PyObject* self, PyObject*) {
  PyObject* module = HiddenModule(self);
  return module != nullptr ? PyObject_Dir(module) : PyList_New(0);
}

PyMethodDef kViewMethods[] = {
    {"__dir__", ViewDir, METH_NOARGS, "the module's names"},
    {nullptr, nullptr, 0, nullptr}};

// ---- __import__ --------------------------------------------------------------

PyObject* Import(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kKeywords[] = {"name", "globals", "locals", "fromlist", "level", nullptr};
  PyObject* name = nullptr;
  PyObject* globals = nullptr;
  PyObject* locals = nullptr;
  PyObject* fromlist = nullptr;
  int level = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U|OOOi:__import__",
                                   const_cast<char**>(kKeywords), &name, &globals, &locals,
                                   &fromlist, &level)) {
    return nullptr;
  }
  Ref module(PyImport_ImportModuleLevelObject(name, globals, locals, fromlist, level));
  if (!module) return nullptr;
  return GuardModuleValue(module.get(), nullptr);
}

PyMethodDef kImportDef = {"__import__", reinterpret_cast<PyCFunction>(
                                            reinterpret_cast<void (*)()>(Import)),
                          METH_VARARGS | METH_KEYWORDS,
                          "__import__(name, globals=None, locals=None, fromlist=(), level=0): "
                          "the module's read-only view (dolsot's runtime gate)"};

// ---- the type --------------------------------------------------------------------

template <typename F>
void* Slot(F function) {
  return reinterpret_cast<void*>(function);
}

std::unique_ptr<ModuleViews> ModuleViews::Create() {
  auto views = std::make_unique<ModuleViews>();
  PyType_Slot slots[] = {{Py_tp_getattro, Slot(ViewGetattro)},
                         {Py_tp_setattro, Slot(ViewSetattro)},
                         {Py_tp_repr, Slot(ViewRepr)},
                         {Py_tp_traverse, Slot(ViewTraverse)},
                         {Py_tp_clear, Slot(ViewClear)},
                         {Py_tp_dealloc, Slot(ViewDealloc)},
                         {Py_tp_methods, kViewMethods},
                         {Py_tp_doc, const_cast<char*>(
                                         "A read-only view of a module (dolsot's runtime gate).")},
                         {0, nullptr}};
  PyType_Spec spec = {"dolsot.ModuleView",
                      static_cast<int>(ModuleOffset() + sizeof(PyObject*)), 0,
                      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE |
                          Py_TPFLAGS_DISALLOW_INSTANTIATION,
                      slots};
  views->type.reset(
      PyType_FromSpecWithBases(&spec, reinterpret_cast<PyObject*>(&PyModule_Type)));
  views->cache.reset(PyDict_New());
  views->import_function.reset(PyCFunction_New(&kImportDef, nullptr));
  if (!views->type || !views->cache || !views->import_function) return nullptr;
  return views;
}

}  // namespace

bool IsModuleView(PyObject* value) {
  ModuleViews* views = Views();
  if (views == nullptr) {
    PyErr_Clear();
    return false;
  }
  return Py_TYPE(value) == reinterpret_cast<PyTypeObject*>(views->type.get());
}

PyObject* ModuleViewOf(PyObject* module) {
  ModuleViews* views = Views();
  if (views == nullptr) return nullptr;
  auto* type = reinterpret_cast<PyTypeObject*>(views->type.get());
  if (Py_TYPE(module) == type) return Py_NewRef(module);
  PyObject* cached = PyDict_GetItemWithError(views->cache.get(), module);  // borrowed
  if (cached != nullptr) return Py_NewRef(cached);
  if (PyErr_Occurred()) return nullptr;
  Ref name(PyModule_GetNameObject(module));
  if (!name) {
    PyErr_Clear();
    name.reset(PyUnicode_FromString("?"));
  }
  Ref args(PyTuple_Pack(1, name.get()));
  if (!args) return nullptr;
  // ModuleType's own __new__ and __init__ (the view's type refuses to be
  // called from Python): a view has a real, small md_dict.
  Ref view(PyModule_Type.tp_new(type, args.get(), nullptr));
  if (!view || PyModule_Type.tp_init(view.get(), args.get(), nullptr) < 0) return nullptr;
  HiddenModule(view.get()) = Py_NewRef(module);
  if (PyDict_SetItem(views->cache.get(), module, view.get()) < 0) return nullptr;
  return view.release();
}

PyObject* GuardModuleValue(PyObject* value, PyObject* label) {
  if (PyModule_Check(value)) return ModuleViewOf(value);
  const int table = IsModuleTable(value);
  if (table < 0) return nullptr;
  if (table == 1) return TableViewOf(value, label);
  return Py_NewRef(value);
}

bool IsGuardedImport(PyObject* function) {
  if (!PyCFunction_Check(function)) return false;
  ModuleViews* views = InterpreterLocal<ModuleViews>(kViewsKey, /*make=*/false);
  return views != nullptr && function == views->import_function.get();
}

PyObject* GuardedImport() {
  ModuleViews* views = Views();
  return views != nullptr ? Py_NewRef(views->import_function.get()) : nullptr;
}

}  // namespace dolsot
