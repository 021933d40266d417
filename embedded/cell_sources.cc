// Cell sources for linecache (see cell_sources.h).
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "embedded/cell_sources.h"

#include "embedded/cell_runtime.h"
#include "embedded/py_ref.h"

namespace dolsot {
namespace {

// linecache.cache when the linecache module is loaded (never importing it),
// after moving the pending sources into it; nullptr otherwise.
PyObject* LoadedLinecache(CellRuntime* runtime) {
  if (runtime->linecache != nullptr) return runtime->linecache;
  Ref module(PyImport_GetModule(runtime->linecache_name));
  if (!module) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* cache = PyObject_GetAttrString(module.get(), "cache");
  if (cache == nullptr || !PyDict_Check(cache) ||
      PyDict_Update(cache, runtime->pending_sources) < 0) {
    Py_XDECREF(cache);
    PyErr_Clear();
    return nullptr;
  }
  PyDict_Clear(runtime->pending_sources);
  runtime->linecache = cache;
  return cache;
}

// The source registered for `filename` (RegisterSource's entry: mtime None),
// as one string; nullopt when there is none. No error set on return.
std::optional<std::string> SourceOf(CellRuntime* runtime, PyObject* filename) {
  PyObject* cache = LoadedLinecache(runtime);
  // Held: linecache.cache is the cells' to change.
  Ref held(Py_XNewRef(PyDict_GetItemWithError(
      cache != nullptr ? cache : runtime->pending_sources, filename)));
  PyObject* entry = held.get();
  if (entry == nullptr || !PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 4 ||
      PyTuple_GET_ITEM(entry, 1) != Py_None || !PyList_Check(PyTuple_GET_ITEM(entry, 2))) {
    PyErr_Clear();
    return std::nullopt;
  }
  std::string source;
  PyObject* lines = PyTuple_GET_ITEM(entry, 2);
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lines); ++i) {
    PyObject* line = PyList_GET_ITEM(lines, i);
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_Check(line) ? PyUnicode_AsUTF8AndSize(line, &size) : nullptr;
    if (utf8 == nullptr) {
      PyErr_Clear();
      return std::nullopt;
    }
    source.append(utf8, static_cast<std::size_t>(size));
  }
  return source;
}

// This interpreter's runtime and `filename` as a str; false (the error
// cleared) when either cannot be had.
bool RuntimeAndName(std::string_view filename, CellRuntime** runtime, Ref* name) {
  *runtime = GetRuntime();
  name->reset(PyUnicode_DecodeUTF8(filename.data(), static_cast<Py_ssize_t>(filename.size()),
                                   "strict"));
  if (*runtime == nullptr || !*name) {
    PyErr_Clear();
    return false;
  }
  return true;
}

}  // namespace

void FlushPendingSources() {
  if (CellRuntime* runtime = GetRuntime()) {
    LoadedLinecache(runtime);
  } else {
    PyErr_Clear();
  }
}

void RegisterSource(CellRuntime* runtime, PyObject* filename, std::string_view code) {
  Ref source(PyUnicode_DecodeUTF8(code.data(), static_cast<Py_ssize_t>(code.size()), "strict"));
  Ref lines(source ? PyUnicode_Splitlines(source.get(), 1) : nullptr);
  Ref size(source ? PyLong_FromSsize_t(PyUnicode_GET_LENGTH(source.get())) : nullptr);
  Ref entry(lines && size ? PyTuple_Pack(4, size.get(), Py_None, lines.get(), filename) : nullptr);
  PyObject* cache = LoadedLinecache(runtime);
  if (cache == nullptr) cache = runtime->pending_sources;
  if (!entry || PyDict_SetItem(cache, filename, entry.get()) < 0) PyErr_Clear();
}

void ForgetCellSource(std::string_view filename) {
  CellRuntime* runtime = nullptr;
  Ref name;
  if (!RuntimeAndName(filename, &runtime, &name)) return;
  for (PyObject* cache : {runtime->pending_sources, LoadedLinecache(runtime)}) {
    if (cache != nullptr && PyDict_Check(cache) && PyDict_DelItem(cache, name.get()) < 0) {
      PyErr_Clear();  // not there
    }
  }
}

CellSourceDicts RegisteredSourceDicts() {
  CellRuntime* runtime = GetRuntime();
  if (runtime == nullptr) {
    PyErr_Clear();
    return {};
  }
  return {runtime->pending_sources, LoadedLinecache(runtime)};
}

void RegisterCellSource(std::string_view filename, std::string_view code) {
  CellRuntime* runtime = nullptr;
  Ref name;
  if (!RuntimeAndName(filename, &runtime, &name)) return;
  RegisterSource(runtime, name.get(), code);
}

std::optional<std::string> RegisteredCellSource(std::string_view filename) {
  CellRuntime* runtime = nullptr;
  Ref name;
  if (!RuntimeAndName(filename, &runtime, &name)) return std::nullopt;
  return SourceOf(runtime, name.get());
}

}  // namespace dolsot
