// TableView (see table_view.h): a heap type per interpreter, the table in a C
// field no attribute reaches.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "embedded/table_view.h"

#include <memory>
#include <string>
#include <string_view>

#include "embedded/interpreter_local.h"
#include "embedded/module_view.h"
#include "embedded/py_ref.h"
#include "embedded/runtime_finding.h"

namespace dolsot {
namespace {

struct TableViewObject {
  PyObject_HEAD
  PyObject* table;  // the module's table: never handed out
  PyObject* label;  // "copy.dispatch_table"
};

struct TableIterObject {
  PyObject_HEAD
  PyObject* iterator;  // over the table
  PyObject* label;
};

// The methods that change a table, refused with the finding by name (any
// other unknown attribute is a plain AttributeError).
constexpr std::string_view kMutators[] = {
    "add", "append", "appendleft", "clear", "difference_update", "discard", "extend",
    "extendleft", "insert", "intersection_update", "move_to_end", "pop", "popitem", "popleft",
    "remove", "reverse", "rotate", "setdefault", "sort", "symmetric_difference_update",
    "update"};

struct TableTypes {
  Ref view_type;
  Ref iter_type;
  Ref abstract_tables;  // (deque, MutableMapping, MutableSequence, MutableSet)
  Ref defaultdict;
  static std::unique_ptr<TableTypes> Create();
};

TableTypes* Types() { return InterpreterLocal<TableTypes>("dolsot.table_view.v1"); }

TableViewObject* AsView(PyObject* self) { return reinterpret_cast<TableViewObject*>(self); }

std::string Label(PyObject* self) { return TextOf(AsView(self)->label); }

int RefuseChange(PyObject* self, std::string_view what) {
  return RaiseRuntimeFinding(
      PyExc_TypeError,
      "changing `" + Label(self) + "` (" + std::string(what) +
          "), a table a module holds, changes it for every session and the host: copy it "
          "first (`t = dict(" +
          Label(self) + ")`, `list(...)`, `set(...)`)");
}

PyObject* Guard(PyObject* self, PyObject* value) {  // steals `value`
  if (value == nullptr) return nullptr;
  PyObject* guarded = GuardModuleValue(value, AsView(self)->label);
  Py_DECREF(value);
  return guarded;
}

// A guarded copy: a dict {k: guarded v}, a list [guarded x], a set, a
// bytearray; nullptr with an error set.
PyObject* GuardedCopy(PyObject* self) {
  PyObject* table = AsView(self)->table;
  if (PyAnySet_Check(table)) return PySet_New(table);
  if (PyByteArray_Check(table)) return PyByteArray_FromObject(table);
  const bool mapping = PyDict_Check(table) || PyObject_HasAttrString(table, "keys");
  if (mapping) {
    Ref copy(PyDict_New());
    Ref keys(PyMapping_Keys(table));
    if (!copy || !keys) return nullptr;
    Ref iterator(PyObject_GetIter(keys.get()));
    if (!iterator) return nullptr;
    while (Ref key{PyIter_Next(iterator.get())}) {
      Ref value(Guard(self, PyObject_GetItem(table, key.get())));
      if (!value || PyDict_SetItem(copy.get(), key.get(), value.get()) < 0) return nullptr;
    }
    return PyErr_Occurred() ? nullptr : copy.release();
  }
  Ref iterator(PyObject_GetIter(table));
  Ref copy(PyList_New(0));
  if (!iterator || !copy) return nullptr;
  while (Ref item{PyIter_Next(iterator.get())}) {
    Ref value(Guard(self, item.release()));
    if (!value || PyList_Append(copy.get(), value.get()) < 0) return nullptr;
  }
  return PyErr_Occurred() ? nullptr : copy.release();
}

// A copy of `operand` when it is a view, else `operand` (new references).
PyObject* Plain(PyObject* operand) {
  if (IsTableView(operand)) return GuardedCopy(operand);
  Py_INCREF(operand);
  return operand;
}

// ---- slots -----------------------------------------------------------------

void ViewDealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  Py_CLEAR(AsView(self)->table);
  Py_CLEAR(AsView(self)->label);
  type->tp_free(self);
  Py_DECREF(type);
}

int ViewTraverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(AsView(self)->table);
  Py_VISIT(AsView(self)->label);
  return 0;
}

PyObject* ViewRepr(PyObject* self) { return PyObject_Repr(AsView(self)->table); }
Py_ssize_t ViewLength(PyObject* self) { return PyObject_Size(AsView(self)->table); }
int ViewContains(PyObject* self, PyObject* key) {
  return PySequence_Contains(AsView(self)->table, key);
}
int ViewBool(PyObject* self) { return PyObject_IsTrue(AsView(self)->table); }

// table[key] as a read: a dict's item without its __missing__ when the key
// is there; for a missing key, a defaultdict's default made afresh and not
// stored (its __missing__ would insert it into the module's table), any
// other table's own lookup (Counter's 0). A new reference.
PyObject* ReadItem(PyObject* self, PyObject* key) {
  PyObject* table = AsView(self)->table;
  if (!PyDict_Check(table)) return PyObject_GetItem(table, key);
  PyObject* item = PyDict_GetItemWithError(table, key);  // borrowed
  if (item != nullptr) return Py_NewRef(item);
  if (PyErr_Occurred()) return nullptr;
  TableTypes* types = Types();
  if (types == nullptr) return nullptr;
  const int is_defaultdict = PyObject_IsInstance(table, types->defaultdict.get());
  if (is_defaultdict < 0) return nullptr;
  if (is_defaultdict == 0) return PyObject_GetItem(table, key);
  Ref factory(PyObject_GetAttrString(table, "default_factory"));
  if (!factory) return nullptr;
  if (factory.get() == Py_None) {
    PyErr_SetObject(PyExc_KeyError, key);
    return nullptr;
  }
  return PyObject_CallNoArgs(factory.get());
}

PyObject* ViewSubscript(PyObject* self, PyObject* key) {
  if (!PySlice_Check(key)) return Guard(self, ReadItem(self, key));
  Ref got(PyObject_GetItem(AsView(self)->table, key));
  if (!got) return nullptr;
  if (PySlice_Check(key) && PyList_Check(got.get())) {  // a fresh list: guard its items
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(got.get()); ++i) {
      PyObject* item = PyList_GET_ITEM(got.get(), i);
      Py_INCREF(item);
      PyObject* guarded = Guard(self, item);
      if (guarded == nullptr) return nullptr;
      PyList_SetItem(got.get(), i, guarded);  // steals
    }
    return got.release();
  }
  return Guard(self, got.release());
}

PyObject* ViewItem(PyObject* self, Py_ssize_t index) {
  return Guard(self, PySequence_GetItem(AsView(self)->table, index));
}

int ViewAssignSubscript(PyObject* self, PyObject* /*key*/, PyObject* value) {
  return RefuseChange(self, value != nullptr ? "an item store" : "an item delete");
}

PyObject* ViewIter(PyObject* self) {
  TableTypes* types = Types();
  if (types == nullptr) return nullptr;
  Ref iterator(PyObject_GetIter(AsView(self)->table));
  if (!iterator) return nullptr;
  auto* made = PyObject_GC_New(TableIterObject, reinterpret_cast<PyTypeObject*>(
                                                    types->iter_type.get()));
  if (made == nullptr) return nullptr;
  made->iterator = iterator.release();
  made->label = Py_NewRef(AsView(self)->label);
  PyObject_GC_Track(made);
  return reinterpret_cast<PyObject*>(made);
}

PyObject* ViewRichCompare(PyObject* self, PyObject* other, int op) {
  Ref mine(GuardedCopy(self));
  Ref theirs(Plain(other));
  if (!mine || !theirs) return nullptr;
  return PyObject_RichCompare(mine.get(), theirs.get(), op);
}

using BinaryFunction = PyObject* (*)(PyObject*, PyObject*);
template <BinaryFunction operation>
PyObject* ViewBinary(PyObject* left, PyObject* right) {
  Ref a(Plain(left));
  Ref b(Plain(right));
  if (!a || !b) return nullptr;
  return operation(a.get(), b.get());
}

PyObject* ViewInPlace(PyObject* self, PyObject* /*other*/) {
  RefuseChange(self, "an in-place operator");
  return nullptr;
}

int ViewSetattro(PyObject* self, PyObject* name, PyObject* value) {
  return RefuseChange(self, std::string(value != nullptr ? "setting" : "deleting") +
                                " attribute `" + TextOf(name) + "`");
}

PyObject* ViewGetattro(PyObject* self, PyObject* name) {
  PyObject* found = PyObject_GenericGetAttr(self, name);
  if (found != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) return found;
  PyErr_Clear();
  const std::string text = TextOf(name);
  for (std::string_view mutator : kMutators) {
    if (text == mutator) {
      RefuseChange(self, "`." + text + "()`");
      return nullptr;
    }
  }
  PyErr_Format(PyExc_AttributeError,
               "`%s` is a read-only view of a table a module holds and has no attribute '%U'; "
               "copy it first (`dict(t)`, `list(t)`, `t.copy()`)",
               Label(self).c_str(), name);
  return nullptr;
}

// ---- methods -----------------------------------------------------------------

// Calls the table's own read method `name` (never handed out) with the args.
PyObject* CallTable(PyObject* self, const char* name, PyObject* const* args, Py_ssize_t nargs,
                    PyObject* kwnames) {
  Ref method(PyObject_GetAttrString(AsView(self)->table, name));
  if (!method) return nullptr;
  return PyObject_Vectorcall(method.get(), args, nargs, kwnames);
}

PyObject* MethodGet(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || nargs > 2) {
    PyErr_SetString(PyExc_TypeError, "get expected 1 or 2 arguments");
    return nullptr;
  }
  PyObject* table = AsView(self)->table;
  Ref got;
  if (PyDict_Check(table)) {  // dict.get: never __missing__
    PyObject* item = PyDict_GetItemWithError(table, args[0]);  // borrowed
    if (item == nullptr) {
      if (PyErr_Occurred()) return nullptr;
      return Py_NewRef(nargs == 2 ? args[1] : Py_None);
    }
    got.reset(Py_NewRef(item));
  } else {
    got.reset(PyObject_GetItem(table, args[0]));
  }
  if (!got) {
    if (!PyErr_ExceptionMatches(PyExc_KeyError) && !PyErr_ExceptionMatches(PyExc_IndexError)) {
      return nullptr;
    }
    PyErr_Clear();
    return Py_NewRef(nargs == 2 ? args[1] : Py_None);
  }
  return Guard(self, got.release());
}

PyObject* MethodKeys(PyObject* self, PyObject*) {
  Ref keys(PyMapping_Keys(AsView(self)->table));
  return keys ? PySequence_List(keys.get()) : nullptr;
}

PyObject* MethodValues(PyObject* self, PyObject*) {
  Ref copy(GuardedCopy(self));
  return copy ? PyMapping_Values(copy.get()) : nullptr;
}

PyObject* MethodItems(PyObject* self, PyObject*) {
  Ref copy(GuardedCopy(self));
  return copy ? PyMapping_Items(copy.get()) : nullptr;
}

PyObject* MethodCopy(PyObject* self, PyObject*) { return GuardedCopy(self); }

#define DOLSOT_TABLE_READ(method_name)                                                      \
  PyObject* Method_##method_name(PyObject* self, PyObject* const* args, Py_ssize_t nargs,   \
                                 PyObject* kwnames) {                                        \
    return CallTable(self, #method_name, args, nargs, kwnames);                              \
  }
DOLSOT_TABLE_READ(index)
DOLSOT_TABLE_READ(count)
DOLSOT_TABLE_READ(isdisjoint)
DOLSOT_TABLE_READ(issubset)
DOLSOT_TABLE_READ(issuperset)
DOLSOT_TABLE_READ(union)
DOLSOT_TABLE_READ(intersection)
DOLSOT_TABLE_READ(difference)
DOLSOT_TABLE_READ(symmetric_difference)
#undef DOLSOT_TABLE_READ

#define DOLSOT_READ_ENTRY(method_name)                                                 \
  {#method_name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(           \
                     Method_##method_name)),                                            \
   METH_FASTCALL | METH_KEYWORDS, nullptr}

PyMethodDef kViewMethods[] = {
    {"get", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(MethodGet)),
     METH_FASTCALL, "t.get(key, default=None): the guarded value, or default"},
    {"keys", MethodKeys, METH_NOARGS, "a list of the keys"},
    {"values", MethodValues, METH_NOARGS, "a list of the (guarded) values"},
    {"items", MethodItems, METH_NOARGS, "a list of (key, guarded value) pairs"},
    {"copy", MethodCopy, METH_NOARGS,
     "a plain dict, list, set or bytearray copy (inner tables stay read-only views)"},
    DOLSOT_READ_ENTRY(index),
    DOLSOT_READ_ENTRY(count),
    DOLSOT_READ_ENTRY(isdisjoint),
    DOLSOT_READ_ENTRY(issubset),
    DOLSOT_READ_ENTRY(issuperset),
    DOLSOT_READ_ENTRY(union),
    DOLSOT_READ_ENTRY(intersection),
    DOLSOT_READ_ENTRY(difference),
    DOLSOT_READ_ENTRY(symmetric_difference),
    {nullptr, nullptr, 0, nullptr}};
#undef DOLSOT_READ_ENTRY

// ---- the iterator --------------------------------------------------------------

TableIterObject* AsIter(PyObject* self) { return reinterpret_cast<TableIterObject*>(self); }

void IterDealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  Py_CLEAR(AsIter(self)->iterator);
  Py_CLEAR(AsIter(self)->label);
  type->tp_free(self);
  Py_DECREF(type);
}

int IterTraverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(AsIter(self)->iterator);
  Py_VISIT(AsIter(self)->label);
  return 0;
}

PyObject* IterNext(PyObject* self) {
  PyObject* item = PyIter_Next(AsIter(self)->iterator);
  if (item == nullptr) return nullptr;
  PyObject* guarded = GuardModuleValue(item, AsIter(self)->label);
  Py_DECREF(item);
  return guarded;
}

// ---- the types -------------------------------------------------------------------

template <typename F>
void* Slot(F function) {
  return reinterpret_cast<void*>(function);
}

std::unique_ptr<TableTypes> TableTypes::Create() {
  auto types = std::make_unique<TableTypes>();
  PyType_Slot view_slots[] = {
      {Py_tp_dealloc, Slot(ViewDealloc)},
      {Py_tp_traverse, Slot(ViewTraverse)},
      {Py_tp_repr, Slot(ViewRepr)},
      {Py_tp_hash, Slot(PyObject_HashNotImplemented)},
      {Py_tp_iter, Slot(ViewIter)},
      {Py_tp_richcompare, Slot(ViewRichCompare)},
      {Py_tp_getattro, Slot(ViewGetattro)},
      {Py_tp_setattro, Slot(ViewSetattro)},
      {Py_tp_methods, kViewMethods},
      {Py_tp_doc, const_cast<char*>(
                      "A read-only view of a table a module holds (dolsot's runtime gate): "
                      "copy it to change it.")},
      {Py_mp_length, Slot(ViewLength)},
      {Py_mp_subscript, Slot(ViewSubscript)},
      {Py_mp_ass_subscript, Slot(ViewAssignSubscript)},
      {Py_sq_length, Slot(ViewLength)},
      {Py_sq_contains, Slot(ViewContains)},
      {Py_sq_item, Slot(ViewItem)},
      {Py_nb_bool, Slot(ViewBool)},
      {Py_nb_or, Slot(ViewBinary<PyNumber_Or>)},
      {Py_nb_and, Slot(ViewBinary<PyNumber_And>)},
      {Py_nb_xor, Slot(ViewBinary<PyNumber_Xor>)},
      {Py_nb_add, Slot(ViewBinary<PyNumber_Add>)},
      {Py_nb_subtract, Slot(ViewBinary<PyNumber_Subtract>)},
      {Py_nb_inplace_or, Slot(ViewInPlace)},
      {Py_nb_inplace_and, Slot(ViewInPlace)},
      {Py_nb_inplace_xor, Slot(ViewInPlace)},
      {Py_nb_inplace_add, Slot(ViewInPlace)},
      {Py_nb_inplace_subtract, Slot(ViewInPlace)},
      {Py_nb_inplace_multiply, Slot(ViewInPlace)},
      {0, nullptr}};
  PyType_Spec view_spec = {"dolsot.TableView", sizeof(TableViewObject), 0,
                           Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE |
                               Py_TPFLAGS_DISALLOW_INSTANTIATION,
                           view_slots};
  types->view_type.reset(PyType_FromSpec(&view_spec));
  if (!types->view_type) return nullptr;
  PyType_Slot iter_slots[] = {{Py_tp_dealloc, Slot(IterDealloc)},
                              {Py_tp_traverse, Slot(IterTraverse)},
                              {Py_tp_iter, Slot(PyObject_SelfIter)},
                              {Py_tp_iternext, Slot(IterNext)},
                              {0, nullptr}};
  PyType_Spec iter_spec = {"dolsot.TableViewIterator", sizeof(TableIterObject), 0,
                           Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE |
                               Py_TPFLAGS_DISALLOW_INSTANTIATION,
                           iter_slots};
  types->iter_type.reset(PyType_FromSpec(&iter_spec));
  if (!types->iter_type) return nullptr;
  Ref collections(PyImport_ImportModule("collections"));
  Ref abc(PyImport_ImportModule("collections.abc"));
  if (!collections || !abc) return nullptr;
  Ref deque(PyObject_GetAttrString(collections.get(), "deque"));
  Ref mapping(PyObject_GetAttrString(abc.get(), "MutableMapping"));
  Ref sequence(PyObject_GetAttrString(abc.get(), "MutableSequence"));
  Ref set(PyObject_GetAttrString(abc.get(), "MutableSet"));
  types->defaultdict.reset(PyObject_GetAttrString(collections.get(), "defaultdict"));
  if (!deque || !mapping || !sequence || !set || !types->defaultdict) return nullptr;
  types->abstract_tables.reset(
      PyTuple_Pack(4, deque.get(), mapping.get(), sequence.get(), set.get()));
  if (!types->abstract_tables) return nullptr;
  return types;
}

}  // namespace

bool IsTableView(PyObject* value) {
  TableTypes* types = Types();
  if (types == nullptr) {
    PyErr_Clear();
    return false;
  }
  return Py_TYPE(value) == reinterpret_cast<PyTypeObject*>(types->view_type.get());
}

int IsModuleTable(PyObject* value) {
  if (PyType_Check(value) || PyUnicode_Check(value) || PyLong_Check(value) ||
      PyFloat_Check(value) || PyTuple_Check(value) || PyBytes_Check(value) ||
      PyFrozenSet_Check(value) || PyFunction_Check(value) || PyCFunction_Check(value) ||
      value == Py_None || PyModule_Check(value)) {
    return 0;
  }
  if (PyDict_Check(value) || PyList_Check(value) || PyAnySet_Check(value) ||
      PyByteArray_Check(value)) {
    return 1;
  }
  if (PyCallable_Check(value)) return 0;
  TableTypes* types = Types();
  if (types == nullptr) return -1;
  if (Py_TYPE(value) == reinterpret_cast<PyTypeObject*>(types->view_type.get())) return 0;
  return PyObject_IsInstance(value, types->abstract_tables.get());
}

PyObject* TableViewOf(PyObject* table, PyObject* label) {
  TableTypes* types = Types();
  if (types == nullptr) return nullptr;
  auto* view = PyObject_GC_New(TableViewObject,
                               reinterpret_cast<PyTypeObject*>(types->view_type.get()));
  if (view == nullptr) return nullptr;
  view->table = Py_NewRef(table);
  view->label = Py_NewRef(label != nullptr ? label : Py_None);
  PyObject_GC_Track(view);
  return reinterpret_cast<PyObject*>(view);
}

}  // namespace dolsot
