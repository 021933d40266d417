// FunctionRecipe (see function_recipe.h): the checks on the function's
// fields here, its annotations written and read by a little glue.
#include "embedded/function_recipe.h"

#include <marshal.h>

#include <optional>
#include <string>

#include "embedded/cell_sources.h"
#include "embedded/plain_values.h"
#include "embedded/py_ref.h"

namespace dolsot {
namespace {

// Runs once, in a private scope. `annotations(f)` returns f's annotations
// as ((name, written), ...) or None; `make(...)` builds the function.
// Annotations are written as (0, value) for a str, int, float, bool or
// None, (1,) for NoneType, (2, name) for a builtin type or function by its
// name, (3, origin, args) for `list[int]`, (4, args) for `int | None`,
// (5,) for `...`.
constexpr char kGlueSource[] = R"PY(
import builtins as _builtins
_type = type
_getattr = getattr
_isinstance = isinstance
_tuple = tuple
_dict = dict
_str = str
_FunctionType = _type(lambda: None)
_CodeType = _type((lambda: None).__code__)
_GenericAlias = _type(list[int])
_UnionType = _type(int | None)
_NoneType = _type(None)
_Ellipsis = _type(...)
_PLAIN = (_str, int, float, bool, _NoneType)

class _Refused(Exception):
    pass

def _write(value):
    kind = _type(value)
    if kind in _PLAIN:
        return (0, value)
    if value is _NoneType:
        return (1,)
    if kind is _Ellipsis:
        return (5,)
    if kind is _type or kind is _type(len):
        name = value.__name__
        if _getattr(_builtins, name, None) is value:
            return (2, name)
    elif kind is _GenericAlias and not _getattr(value, '__unpacked__', False):
        return (3, _write(value.__origin__), _tuple(_write(arg) for arg in value.__args__))
    elif kind is _UnionType:
        return (4, _tuple(_write(arg) for arg in value.__args__))
    raise _Refused

def _read(written):
    kind = written[0]
    if kind == 0 and _type(written[1]) in _PLAIN:
        return written[1]
    if kind == 1:
        return _NoneType
    if kind == 5:
        return ...
    if kind == 2:
        value = _getattr(_builtins, written[1])
        if _type(value) is _type or _type(value) is _type(len):
            return value
    elif kind == 3:
        return _GenericAlias(_read(written[1]), _tuple(_read(arg) for arg in written[2]))
    elif kind == 4:
        union = _read(written[1][0])
        for arg in written[1][1:]:
            union = union | _read(arg)
        return union
    raise _Refused

def annotations(f):
    try:
        written = f.__annotations__
        if _type(written) is not _dict or any(_type(name) is not _str for name in written):
            return None
        return _tuple((name, _write(value)) for name, value in written.items())
    except _Refused:
        return None

def make(code, globals, name, qualname, defaults, kwdefaults, doc, module, written):
    if (_type(code) is not _CodeType or code.co_freevars or _type(name) is not _str or
            _type(qualname) is not _str or _type(doc) not in (_str, _NoneType) or
            _type(module) not in (_str, _NoneType)):
        raise _Refused
    f = _FunctionType(code, globals, name, defaults)
    f.__qualname__ = qualname
    f.__kwdefaults__ = kwdefaults
    f.__doc__ = doc
    f.__module__ = module
    f.__annotations__ = _dict((key, _read(value)) for key, value in written)
    return f
)PY";

constexpr int kRecipeFields = 9;  // code, name, qualname, defaults, kwdefaults, doc, module,
                                  // annotations, source

struct Glue {
  PyObject* annotations = nullptr;
  PyObject* make = nullptr;
};
Glue* g_glue = nullptr;  // per process

// The checks that need no Python call: an exact function, no closure, no
// attributes of its own, no weak reference, no type parameters, plain
// immutable defaults (counted against `*budget`).
bool Plain(PyObject* value, int* budget) {
  if (g_glue == nullptr || !PyFunction_Check(value)) return false;
  auto* function = reinterpret_cast<PyFunctionObject*>(value);
  if (function->func_closure != nullptr || function->func_weakreflist != nullptr) return false;
  if (function->func_dict != nullptr && (!PyDict_Check(function->func_dict) ||
                                         PyDict_GET_SIZE(function->func_dict) != 0)) {
    return false;
  }
#if PY_VERSION_HEX >= 0x030C0000
  if (function->func_typeparams != nullptr &&
      !(PyTuple_Check(function->func_typeparams) && PyTuple_GET_SIZE(function->func_typeparams) == 0)) {
    return false;
  }
#endif
  // What make() checks (a recipe must always read back: a promoted
  // snapshot that cannot bind its values ends the session).
  auto str_or_none = [](PyObject* o) { return o == nullptr || o == Py_None || PyUnicode_CheckExact(o); };
  if (!PyUnicode_CheckExact(function->func_name) || !PyUnicode_CheckExact(function->func_qualname) ||
      !str_or_none(function->func_doc) || !str_or_none(function->func_module)) {
    return false;
  }
  auto* code = reinterpret_cast<PyCodeObject*>(function->func_code);
  if (PyCode_GetNumFree(code) != 0) return false;
  PyObject* defaults = function->func_defaults;
  if (defaults != nullptr && !(PyTuple_CheckExact(defaults) && IsImmutable(defaults, budget))) {
    return false;
  }
  PyObject* keyword = function->func_kwdefaults;
  if (keyword != nullptr) {
    if (!PyDict_CheckExact(keyword)) return false;
    Py_ssize_t position = 0;
    PyObject *key, *item;  // borrowed
    while (PyDict_Next(keyword, &position, &key, &item)) {
      if (!PyUnicode_CheckExact(key) || !IsImmutable(item, budget)) return false;
    }
  }
  return true;
}

}  // namespace

bool FunctionRecipe::Prepare() {
  if (g_glue != nullptr) return true;
  Ref scope(PyDict_New());
  Ref builtins(PyImport_ImportModule("builtins"));
  if (!scope || !builtins || PyDict_SetItemString(scope.get(), "__builtins__", builtins.get()) < 0) {
    PyErr_Clear();
    return false;
  }
  Ref done(PyRun_String(kGlueSource, Py_file_input, scope.get(), scope.get()));
  PyObject* annotations = PyDict_GetItemString(scope.get(), "annotations");  // borrowed
  PyObject* make = PyDict_GetItemString(scope.get(), "make");                // borrowed
  if (!done || annotations == nullptr || make == nullptr) {
    PyErr_Clear();
    return false;
  }
  g_glue = new Glue{Py_NewRef(annotations), Py_NewRef(make)};  // kept for the process's life
  return true;
}

bool FunctionRecipe::Disposable(PyObject* value) {
  int budget = 256;
  if (!Plain(value, &budget)) return false;
  Ref annotations(PyObject_CallOneArg(g_glue->annotations, value));
  const bool plain = annotations && annotations.get() != Py_None;
  PyErr_Clear();
  return plain;
}

bool FunctionRecipe::Write(PyObject* value, PyObject* globals, int* budget, std::string* out) {
  // The namespace alone holds it: a copy then stands for it.
  if (Py_REFCNT(value) != 1 || !Plain(value, budget)) return false;
  auto* function = reinterpret_cast<PyFunctionObject*>(value);
  if (function->func_globals != globals) return false;
  Ref annotations(PyObject_CallOneArg(g_glue->annotations, value));
  if (!annotations || annotations.get() == Py_None) {
    PyErr_Clear();
    return false;
  }
  auto* code = reinterpret_cast<PyCodeObject*>(function->func_code);
  Py_ssize_t filename_size = 0;
  const char* filename = PyUnicode_AsUTF8AndSize(code->co_filename, &filename_size);
  std::optional<std::string> source;
  if (filename != nullptr) {
    source = RegisteredCellSource(std::string_view(filename, static_cast<std::size_t>(filename_size)));
  }
  PyErr_Clear();
  Ref source_text(PyUnicode_DecodeUTF8(source ? source->data() : "",
                                       source ? static_cast<Py_ssize_t>(source->size()) : 0, "strict"));
  PyObject* none = Py_None;
  auto or_none = [none](PyObject* o) { return o != nullptr ? o : none; };
  Ref recipe(PyTuple_Pack(kRecipeFields, function->func_code, function->func_name,
                          function->func_qualname, or_none(function->func_defaults),
                          or_none(function->func_kwdefaults), or_none(function->func_doc),
                          or_none(function->func_module), annotations.get(),
                          source_text ? source_text.get() : none));
  Ref bytes(recipe ? PyMarshal_WriteObjectToString(recipe.get(), Py_MARSHAL_VERSION) : nullptr);
  if (!bytes || !PyBytes_Check(bytes.get())) {
    PyErr_Clear();
    return false;
  }
  out->clear();
  out->push_back(kTag);
  out->append(PyBytes_AS_STRING(bytes.get()), static_cast<std::size_t>(PyBytes_GET_SIZE(bytes.get())));
  return true;
}

PyObject* FunctionRecipe::Read(PyObject* globals, std::string_view bytes, std::string* source) {
  source->clear();
  if (g_glue == nullptr || !IsRecipe(bytes)) return nullptr;
  Ref recipe(PyMarshal_ReadObjectFromString(bytes.data() + 1, static_cast<Py_ssize_t>(bytes.size() - 1)));
  if (!recipe || !PyTuple_CheckExact(recipe.get()) || PyTuple_GET_SIZE(recipe.get()) != kRecipeFields) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* r = recipe.get();
  Ref function(PyObject_CallFunctionObjArgs(
      g_glue->make, PyTuple_GET_ITEM(r, 0), globals, PyTuple_GET_ITEM(r, 1), PyTuple_GET_ITEM(r, 2),
      PyTuple_GET_ITEM(r, 3), PyTuple_GET_ITEM(r, 4), PyTuple_GET_ITEM(r, 5), PyTuple_GET_ITEM(r, 6),
      PyTuple_GET_ITEM(r, 7), nullptr));
  if (!function) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* text = PyTuple_GET_ITEM(r, 8);
  if (PyUnicode_Check(text)) {
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(text, &size);
    if (utf8 != nullptr) source->assign(utf8, static_cast<std::size_t>(size));
    PyErr_Clear();
  }
  return function.release();
}

}  // namespace dolsot
