// CellRuntime: one per interpreter, kept in the interpreter's state dict; a
// per-thread cache finds it without a dict lookup (see cell_runtime.h).
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "embedded/cell_runtime.h"

#include <atomic>
#include <cstdint>
#include <memory>

#include "embedded/output_router.h"
#include "embedded/py_ref.h"

namespace dolsot {

CellCapture*& CurrentCaptureSlot() {
  thread_local CellCapture* slot = nullptr;
  return slot;
}

namespace {

// The last runtime GetRuntime returned on this thread, for its interpreter.
// Per thread, so interpreters with a GIL each never share it; a runtime's
// destruction (at its interpreter's finalization) bumps the generation, which
// makes every thread's copy stale.
std::atomic<std::uint64_t> runtime_generation{0};
struct RuntimeCache {
  PyInterpreterState* interpreter = nullptr;
  CellRuntime* runtime = nullptr;
  std::uint64_t generation = 0;
};
RuntimeCache& LastRuntime() {
  thread_local RuntimeCache cache;
  return cache;
}

constexpr const char* kRuntimeKey = "dolsot.cell_runtime.v1";

// Objects are left alone when the interpreter's dict is cleared at
// finalization (it is too late to run Python code safely); the struct goes.
void DestroyRuntime(PyObject* capsule) {
  runtime_generation.fetch_add(1);
  delete static_cast<CellRuntime*>(PyCapsule_GetPointer(capsule, kRuntimeKey));
}

PyObject* ImportAttr(const char* module_name, const char* attr) {
  Ref module(PyImport_ImportModule(module_name));
  return module ? PyObject_GetAttrString(module.get(), attr) : nullptr;
}

// Builds the runtime; on failure a Python error is set and nullptr returned.
CellRuntime* CreateRuntime(PyObject* interpreter_dict) {
  auto runtime = std::make_unique<CellRuntime>();
  runtime->capture_slot = &CurrentCaptureSlot;
  runtime->router_type = NewRouterType();
  runtime->pending_sources = PyDict_New();
  // The C module _ast, not ast: same classes, without ast's ~6 ms import.
  runtime->ast_expr = ImportAttr("_ast", "Expr");
  runtime->ast_expression = ImportAttr("_ast", "Expression");
  runtime->compile = ImportAttr("builtins", "compile");
  runtime->builtins = PyImport_ImportModule("builtins");
  runtime->body_name = PyUnicode_InternFromString("body");
  runtime->value_name = PyUnicode_InternFromString("value");
  Ref sys_module(PyImport_ImportModule("sys"));
  runtime->sys_dict = sys_module ? Py_XNewRef(PyModule_GetDict(sys_module.get())) : nullptr;
  runtime->stream_names[0] = PyUnicode_InternFromString("stdout");
  runtime->stream_names[1] = PyUnicode_InternFromString("stderr");
  runtime->stream_names[2] = PyUnicode_InternFromString("stdin");
  runtime->builtins_key = PyUnicode_InternFromString("__builtins__");
  runtime->linecache_name = PyUnicode_InternFromString("linecache");
  runtime->pyplot_name = PyUnicode_InternFromString("matplotlib.pyplot");
  if (!runtime->router_type || !runtime->pending_sources || !runtime->ast_expr ||
      !runtime->ast_expression || !runtime->compile || !runtime->builtins ||
      !runtime->body_name || !runtime->value_name || !runtime->sys_dict ||
      !runtime->stream_names[0] || !runtime->stream_names[1] || !runtime->stream_names[2] ||
      !runtime->builtins_key || !runtime->linecache_name || !runtime->pyplot_name) {
    return nullptr;  // the few references taken are leaked: this never happens in practice
  }
  Ref capsule(PyCapsule_New(runtime.get(), kRuntimeKey, DestroyRuntime));
  if (!capsule || PyDict_SetItemString(interpreter_dict, kRuntimeKey, capsule.get()) < 0) {
    return nullptr;
  }
  return runtime.release();
}

}  // namespace

CellRuntime* GetRuntime() {
  PyInterpreterState* interpreter = PyInterpreterState_Get();
  RuntimeCache& last = LastRuntime();
  std::uint64_t generation = runtime_generation.load();
  if (last.interpreter == interpreter && last.runtime != nullptr &&
      last.generation == generation) {
    return last.runtime;
  }
  PyObject* interpreter_dict = PyInterpreterState_GetDict(interpreter);
  if (interpreter_dict == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "no interpreter state dict");
    return nullptr;
  }
  PyObject* capsule = PyDict_GetItemString(interpreter_dict, kRuntimeKey);  // borrowed
  CellRuntime* runtime =
      capsule != nullptr ? static_cast<CellRuntime*>(PyCapsule_GetPointer(capsule, kRuntimeKey))
                         : CreateRuntime(interpreter_dict);
  if (runtime != nullptr) last = RuntimeCache{interpreter, runtime, generation};
  return runtime;
}

}  // namespace dolsot
