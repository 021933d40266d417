// The one cell-execution routine both backends share (see cell_runner.h):
// bounded text, the per-thread stdout/stderr/stdin router, bounded repr, and
// RunCell itself.
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "embedded/cell_runner.h"
#include "embedded/cell_tools.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>

#include "core/utf8.h"
#include "embedded/bounded_repr.h"
#include "embedded/figures.h"
#include "embedded/py_ref.h"
#include "embedded/python_text.h"
#include "embedded/split_guess.h"
#include "embedded/toolbox_hints.h"

namespace dolsot {
namespace {

// ---------------------------------------------------------------------------
// UTF-8 (core/utf8.h decodes; this adds the NUL a C string cannot hold).

// The offset of the first byte that breaks UTF-8 (or is a NUL), or nullopt.
std::optional<std::size_t> FirstBadByte(std::string_view s, bool* is_nul) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '\0') {
      *is_nul = true;
      return i;
    }
    const std::size_t length = Utf8SequenceLength(s, i);
    if (length == 0) return i;
    i += length;
  }
  return std::nullopt;
}

}  // namespace

namespace {

// ---------------------------------------------------------------------------
// Small CPython helpers.

std::string TypeNameOf(PyObject* obj) { return Py_TYPE(obj)->tp_name; }

// The class's __name__ (tp_name without the module a static type puts first).
std::string ExceptionTypeName(PyObject* exc) {
  std::string name = TypeNameOf(exc);
  std::size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

void FlushPendingSources();  // below, with the runtime

// traceback.<function>(exc) joined, without its final newline.
std::string FormatWithTraceback(PyObject* exc, const char* function) {
  Ref module(PyImport_ImportModule("traceback"));
  FlushPendingSources();  // traceback imported linecache: give it the cells' lines
  Ref lines(module ? PyObject_CallMethod(module.get(), function, "O", exc) : nullptr);
  Ref empty(PyUnicode_FromString(""));
  Ref joined(lines && empty ? PyUnicode_Join(empty.get(), lines.get()) : nullptr);
  if (!joined) {
    PyErr_Clear();
    return ShortExceptionText(exc);
  }
  std::string out = Utf8ForReader(joined.get());
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// ---------------------------------------------------------------------------
// The per-thread capture a running cell writes into.

class CellCapture {
 public:
  CellCapture(std::size_t max_chars, OutputSink* sink) : text_(max_chars), sink_(sink) {}
  virtual ~CellCapture() = default;
  // Virtual so that a router built by another copy of this code (an extension
  // module and an executable in one process) calls this copy's code.
  virtual void Write(std::string_view utf8, long long chars) {
    text_.Append(utf8, chars);
    if (sink_ != nullptr) sink_->Write(utf8);
  }
  std::string Text() const { return text_.Text(); }
  // The figures the cell returns (embedded/figures.h), virtual for the same reason.
  virtual std::size_t ImageCount() const { return images_.size(); }
  virtual void AddImage(std::string png) { images_.push_back(std::move(png)); }
  std::vector<std::string> TakeImages() { return std::move(images_); }

 private:
  BoundedText text_;
  OutputSink* sink_;
  std::vector<std::string> images_;
};

CellCapture*& CurrentCaptureSlot() {
  thread_local CellCapture* slot = nullptr;
  return slot;
}

// ---------------------------------------------------------------------------
// The router: the object installed as sys.stdout, sys.stderr and sys.stdin.
// On a thread running a cell it writes into that cell's capture (stdin reads
// as empty); on every other thread it forwards to the stream it replaced.

enum class StreamKind : int { kStdout, kStderr, kStdin };

struct RouterObject {
  PyObject_HEAD
  PyObject* original;  // the stream it replaced (may be None)
  StreamKind kind;
};

RouterObject* AsRouter(PyObject* self) { return reinterpret_cast<RouterObject*>(self); }
bool Capturing() { return CurrentCaptureSlot() != nullptr; }

void RouterDealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  Py_XDECREF(AsRouter(self)->original);
  type->tp_free(self);
  Py_DECREF(type);
}

// Calls original.<name>(*args, **kwargs); without an original, returns
// `fallback` (a new reference) instead.
PyObject* Forward(PyObject* self, const char* name, PyObject* args, PyObject* kwargs,
                  PyObject* fallback) {
  PyObject* original = AsRouter(self)->original;
  if (original == nullptr || original == Py_None) return fallback;
  Py_XDECREF(fallback);
  Ref method(PyObject_GetAttrString(original, name));
  if (!method) return nullptr;
  Ref no_args(args == nullptr ? PyTuple_New(0) : nullptr);
  return PyObject_Call(method.get(), args != nullptr ? args : no_args.get(), kwargs);
}

PyObject* RouterWrite(PyObject* self, PyObject* text) {
  if (!Capturing() || AsRouter(self)->kind == StreamKind::kStdin) {
    Ref args(PyTuple_Pack(1, text));
    if (!args) return nullptr;
    // Without a stream to forward to (a host with no stdout), output is dropped.
    return Forward(self, "write", args.get(), nullptr,
                   PyUnicode_Check(text) ? PyLong_FromSsize_t(PyUnicode_GET_LENGTH(text))
                                         : Py_NewRef(Py_None));
  }
  if (!PyUnicode_Check(text)) {
    PyErr_Format(PyExc_TypeError, "write() argument must be str, not %.100s",
                 Py_TYPE(text)->tp_name);
    return nullptr;
  }
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text, &size);
  if (data != nullptr) {
    CurrentCaptureSlot()->Write(std::string_view(data, static_cast<std::size_t>(size)),
                                PyUnicode_GET_LENGTH(text));
  } else {
    PyErr_Clear();
    CurrentCaptureSlot()->Write(Utf8ForReader(text), -1);
  }
  return PyLong_FromSsize_t(PyUnicode_GET_LENGTH(text));
}

PyObject* RouterWriteLines(PyObject* self, PyObject* lines) {
  if (!Capturing()) {
    Ref args(PyTuple_Pack(1, lines));
    return args ? Forward(self, "writelines", args.get(), nullptr, Py_NewRef(Py_None)) : nullptr;
  }
  Ref iterator(PyObject_GetIter(lines));
  if (!iterator) return nullptr;
  while (Ref line{PyIter_Next(iterator.get())}) {
    Ref written(RouterWrite(self, line.get()));
    if (!written) return nullptr;
  }
  if (PyErr_Occurred()) return nullptr;
  Py_RETURN_NONE;
}

PyObject* RouterFlush(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (Capturing()) Py_RETURN_NONE;
  return Forward(self, "flush", args, kwargs, Py_NewRef(Py_None));
}

PyObject* RouterIsatty(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (Capturing()) Py_RETURN_FALSE;
  return Forward(self, "isatty", args, kwargs, Py_NewRef(Py_False));
}

PyObject* RouterFileno(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (Capturing()) {
    // input() then takes its non-terminal path: readline() on this router.
    PyErr_SetString(PyExc_OSError, "a dolsot cell's stream has no file descriptor");
    return nullptr;
  }
  PyObject* original = AsRouter(self)->original;
  if (original == nullptr || original == Py_None) {
    PyErr_SetString(PyExc_OSError, "no underlying stream");
    return nullptr;
  }
  return Forward(self, "fileno", args, kwargs, nullptr);
}

// read(), readline(), readlines(): empty on a cell's thread (stdin is empty).
PyObject* RouterReadEmpty(PyObject* self, const char* name, PyObject* args, PyObject* kwargs,
                          bool as_list) {
  if (Capturing()) {
    if (AsRouter(self)->kind != StreamKind::kStdin) {
      PyErr_SetString(PyExc_OSError, "not readable");
      return nullptr;
    }
    return as_list ? PyList_New(0) : PyUnicode_FromString("");
  }
  return Forward(self, name, args, kwargs, as_list ? PyList_New(0) : PyUnicode_FromString(""));
}

PyObject* RouterRead(PyObject* self, PyObject* args, PyObject* kwargs) {
  return RouterReadEmpty(self, "read", args, kwargs, false);
}
PyObject* RouterReadline(PyObject* self, PyObject* args, PyObject* kwargs) {
  return RouterReadEmpty(self, "readline", args, kwargs, false);
}
PyObject* RouterReadlines(PyObject* self, PyObject* args, PyObject* kwargs) {
  return RouterReadEmpty(self, "readlines", args, kwargs, true);
}

PyObject* RouterReadable(PyObject* self, PyObject*) {
  return PyBool_FromLong(AsRouter(self)->kind == StreamKind::kStdin);
}
PyObject* RouterWritable(PyObject* self, PyObject*) {
  return PyBool_FromLong(AsRouter(self)->kind != StreamKind::kStdin);
}

// Any other attribute (encoding, buffer, ...) comes from the replaced stream.
PyObject* RouterGetAttr(PyObject* self, PyObject* name) {
  PyObject* found = PyObject_GenericGetAttr(self, name);
  if (found != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) return found;
  PyObject* original = AsRouter(self)->original;
  if (original == nullptr || original == Py_None) return nullptr;
  PyErr_Clear();
  return PyObject_GetAttr(original, name);
}

#define DOLSOT_KW_METHOD(name, fn) \
  {name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fn)), METH_VARARGS | METH_KEYWORDS, nullptr}

PyMethodDef kRouterMethods[] = {
    {"write", RouterWrite, METH_O, nullptr},
    {"writelines", RouterWriteLines, METH_O, nullptr},
    DOLSOT_KW_METHOD("flush", RouterFlush),
    DOLSOT_KW_METHOD("isatty", RouterIsatty),
    DOLSOT_KW_METHOD("fileno", RouterFileno),
    DOLSOT_KW_METHOD("read", RouterRead),
    DOLSOT_KW_METHOD("readline", RouterReadline),
    DOLSOT_KW_METHOD("readlines", RouterReadlines),
    {"readable", RouterReadable, METH_NOARGS, nullptr},
    {"writable", RouterWritable, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

#undef DOLSOT_KW_METHOD

PyType_Slot kRouterSlots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(RouterDealloc)},
    {Py_tp_getattro, reinterpret_cast<void*>(RouterGetAttr)},
    {Py_tp_methods, kRouterMethods},
    {Py_tp_doc, const_cast<char*>("dolsot: routes a cell thread's stdio to its capture")},
    {0, nullptr},
};

PyType_Spec kRouterSpec = {
    "dolsot.CellStream", sizeof(RouterObject), 0, Py_TPFLAGS_DEFAULT, kRouterSlots,
};

// ---------------------------------------------------------------------------
// Per-interpreter runtime: cached helpers, kept in the interpreter's state
// dict (never in a C++ static), so a finalized and restarted interpreter gets
// fresh ones and two copies of this code in one process share one router.

struct CellRuntime {
  CellCapture*& (*capture_slot)() = nullptr;  // the thread slot routers read
  PyObject* router_type = nullptr;
  // linecache.cache once the linecache module is imported (by a traceback
  // or by user code); until then the cells' sources wait in pending_sources.
  // Importing linecache eagerly costs ~10 ms (tokenize, re) per process.
  PyObject* linecache = nullptr;
  PyObject* pending_sources = nullptr;  // filename -> linecache entry
  PyObject* ast_expr = nullptr;        // _ast.Expr (what ast.Expr is)
  PyObject* ast_expression = nullptr;  // _ast.Expression
  PyObject* compile = nullptr;         // builtins.compile
  PyObject* builtins = nullptr;        // the builtins module
  PyObject* body_name = nullptr;       // "body"
  PyObject* value_name = nullptr;      // "value"
  // Looked up on every cell: kept here so a cell's set-up makes no string
  // from a C literal and does no dictionary lookup it can avoid (each such
  // step cost µs with the caches cold, as they are when the agent thinks
  // between cells).
  PyObject* sys_dict = nullptr;          // the sys module's dict (sys.stdout lives there)
  PyObject* stream_names[3] = {};        // "stdout", "stderr", "stdin"
  PyObject* builtins_key = nullptr;      // "__builtins__"
  PyObject* linecache_name = nullptr;    // "linecache"
  PyObject* pyplot_name = nullptr;       // "matplotlib.pyplot"
  // The _dolsot_figures module (embedded/figures.h), made by the first cell
  // (or InstallFigureBackend); Py_None when it could not be made.
  PyObject* figures = nullptr;
};

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
  runtime->router_type = PyType_FromSpec(&kRouterSpec);
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

// Makes sys.stdout/stderr/stdin routers (again, if someone replaced them, as
// pytest's capture does). Returns false with a Python error set on failure.
bool EnsureRouters(CellRuntime* runtime) {
  static const StreamKind kKinds[] = {StreamKind::kStdout, StreamKind::kStderr,
                                      StreamKind::kStdin};
  auto* type = reinterpret_cast<PyTypeObject*>(runtime->router_type);
  for (int i = 0; i < 3; ++i) {
    PyObject* name = runtime->stream_names[i];
    PyObject* current = PyDict_GetItemWithError(runtime->sys_dict, name);  // borrowed
    if (current == nullptr && PyErr_Occurred()) return false;
    if (current != nullptr && Py_TYPE(current) == type) continue;
    Ref router(type->tp_alloc(type, 0));
    if (!router) return false;
    AsRouter(router.get())->original = Py_NewRef(current != nullptr ? current : Py_None);
    AsRouter(router.get())->kind = kKinds[i];
    if (PyDict_SetItem(runtime->sys_dict, name, router.get()) < 0) return false;
  }
  return true;
}

// Sets the calling thread's capture for the life of the scope.
class CaptureScope {
 public:
  CaptureScope(CellRuntime* runtime, CellCapture* capture)
      : slot_(runtime->capture_slot()), previous_(slot_) {
    slot_ = capture;
  }
  ~CaptureScope() { slot_ = previous_; }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  CellCapture*& slot_;
  CellCapture* previous_;
};

// ---------------------------------------------------------------------------
// Figures: the two functions _dolsot_figures calls to reach the running
// cell's capture (through the runtime's slot, shared by every copy of this
// code in the process).

CellCapture* RunningCellCapture() {
  CellRuntime* runtime = GetRuntime();
  if (runtime == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  return runtime->capture_slot();
}

PyObject* CellImages(PyObject*, PyObject*) {
  CellCapture* capture = RunningCellCapture();
  return PyLong_FromSsize_t(capture == nullptr ? -1 : static_cast<Py_ssize_t>(capture->ImageCount()));
}

PyObject* AddCellImage(PyObject*, PyObject* png) {
  CellCapture* capture = RunningCellCapture();
  if (capture == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "no dolsot cell runs on this thread");
    return nullptr;
  }
  if (!PyBytes_Check(png)) {
    PyErr_SetString(PyExc_TypeError, "a figure is PNG bytes");
    return nullptr;
  }
  capture->AddImage(std::string(PyBytes_AS_STRING(png), static_cast<std::size_t>(PyBytes_GET_SIZE(png))));
  Py_RETURN_NONE;
}

PyMethodDef kCellImagesMethod = {"_cell_images", CellImages, METH_NOARGS, nullptr};
PyMethodDef kAddCellImageMethod = {"_add_cell_image", AddCellImage, METH_O, nullptr};

// Makes the figure module once per interpreter; a failure leaves cells
// without figures (Py_None), never without a run.
void EnsureFigures(CellRuntime* runtime, bool force) {
  if (runtime->figures != nullptr) {
    if (force && runtime->figures != Py_None) SelectFigureBackend(runtime->figures, true);
    return;
  }
  Ref count(PyCFunction_New(&kCellImagesMethod, nullptr));
  Ref add(PyCFunction_New(&kAddCellImageMethod, nullptr));
  runtime->figures = count && add ? CreateFigureModule(count.get(), add.get()) : nullptr;
  if (runtime->figures == nullptr) {
    PyErr_Clear();
    runtime->figures = Py_NewRef(Py_None);
    return;
  }
  SelectFigureBackend(runtime->figures, force);
}

// At a cell's end: its figures, if it (or an earlier cell) imported pyplot.
void CollectCellFigures(CellRuntime* runtime) {
  if (runtime->figures == nullptr || runtime->figures == Py_None) return;
  PyObject* pyplot = PyDict_GetItemWithError(PyImport_GetModuleDict(), runtime->pyplot_name);
  if (pyplot == nullptr) {
    PyErr_Clear();
    return;
  }
  CollectFigures(runtime->figures);
}

}  // namespace

std::size_t ValueCap(const CellRequest& request) {
  if (request.max_repr == 0) return request.max_output;
  if (request.max_output == 0) return request.max_repr;
  return std::min(request.max_repr, request.max_output);
}

std::vector<std::string> HeldNames(PyObject* globals, const std::vector<std::string>& hidden) {
  std::vector<std::string> names;
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t position = 0;
  while (PyDict_Next(globals, &position, &key, &value)) {
    if (!PyUnicode_Check(key)) continue;
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(key, &size);
    if (data == nullptr) {
      PyErr_Clear();
      continue;
    }
    std::string_view name(data, static_cast<std::size_t>(size));
    if (name.size() >= 4 && name.starts_with("__") && name.ends_with("__")) continue;
    if (std::find(hidden.begin(), hidden.end(), name) != hidden.end()) continue;
    names.emplace_back(name);
  }
  return names;
}

Status InstallFigureBackend(bool force) {
  CellRuntime* runtime = GetRuntime();
  if (runtime == nullptr) {
    Ref exc(TakeRaisedException());
    return InternalError("cannot set up figures: " +
                         (exc ? ShortExceptionText(exc.get()) : std::string("unknown error")));
  }
  EnsureFigures(runtime, force);
  return Status::Ok();
}

Status InstallCellIo() {
  CellRuntime* runtime = GetRuntime();
  if (runtime == nullptr || !EnsureRouters(runtime)) {
    Ref exc(TakeRaisedException());
    return InternalError("cannot install the cell stdio router: " +
                         (exc ? ShortExceptionText(exc.get()) : std::string("unknown error")));
  }
  return Status::Ok();
}

namespace {

// ---------------------------------------------------------------------------
// RunCell's steps.

Result FailedResult(std::string error, int exit_code = kExitFailure) {
  Result result;
  result.ok = false;
  result.error_type = "ValueError";  // bad input; callers name a precise type where known
  result.exit_code = exit_code;
  result.error = std::move(error);
  return result;
}

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

void FlushPendingSources() {
  if (CellRuntime* runtime = GetRuntime()) {
    LoadedLinecache(runtime);
  } else {
    PyErr_Clear();
  }
}

// Registers the cell's source for linecache so tracebacks show its lines.
void RegisterSource(CellRuntime* runtime, PyObject* filename, std::string_view code) {
  Ref source(PyUnicode_DecodeUTF8(code.data(), static_cast<Py_ssize_t>(code.size()), "strict"));
  Ref lines(source ? PyUnicode_Splitlines(source.get(), 1) : nullptr);
  Ref size(source ? PyLong_FromSsize_t(PyUnicode_GET_LENGTH(source.get())) : nullptr);
  Ref entry(lines && size ? PyTuple_Pack(4, size.get(), Py_None, lines.get(), filename) : nullptr);
  PyObject* cache = LoadedLinecache(runtime);
  if (cache == nullptr) cache = runtime->pending_sources;
  if (!entry || PyDict_SetItem(cache, filename, entry.get()) < 0) PyErr_Clear();
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

// The compiled cell: the statements, and the trailing expression if any.
struct CompiledCell {
  Ref statements;
  Ref trailing;  // nullptr when the cell does not end with an expression
};

// Compiles `source` (NUL-terminated) in `mode`; nullptr with an error set.
PyObject* CompileSource(const char* source, PyObject* filename, int mode) {
  PyCompilerFlags flags = _PyCompilerFlags_INIT;
  flags.cf_flags = PyCF_IGNORE_COOKIE;
  return Py_CompileStringObject(source, filename, mode, &flags, -1);
}

// The fast path; false (no error set) when the AST path must decide.
bool CompileCellFast(const std::string& code, PyObject* filename, CompiledCell& compiled) {
  SplitGuess guess = GuessSplit(code);
  if (guess.kind == LastLine::kUnclear) return false;
  if (guess.kind == LastLine::kStatement) {
    compiled.statements.reset(CompileSource(code.c_str(), filename, Py_file_input));
    return true;  // a SyntaxError here is the cell's own: reported as is
  }
  // The expression keeps its line numbers: blank lines stand in for the prefix.
  std::size_t lines_before = static_cast<std::size_t>(
      std::count(code.begin(), code.begin() + static_cast<std::ptrdiff_t>(guess.offset), '\n'));
  std::string expression(lines_before, '\n');
  expression.append(code, guess.offset, std::string::npos);
  compiled.trailing.reset(CompileSource(expression.c_str(), filename, Py_eval_input));
  if (compiled.trailing && guess.has_prefix) {
    std::string prefix = code.substr(0, guess.offset);
    compiled.statements.reset(CompileSource(prefix.c_str(), filename, Py_file_input));
  }
  if (compiled.trailing && (compiled.statements || !guess.has_prefix)) return true;
  PyErr_Clear();
  compiled.statements.reset(nullptr);
  compiled.trailing.reset(nullptr);
  return false;
}

// Parses and compiles; on failure a Python error (a SyntaxError) is set.
bool CompileCell(CellRuntime* runtime, const std::string& code, PyObject* filename,
                 CompiledCell& compiled) {
  if (CompileCellFast(code, filename, compiled)) return compiled.statements || compiled.trailing;
  PyCompilerFlags flags = _PyCompilerFlags_INIT;
  flags.cf_flags = PyCF_ONLY_AST | PyCF_IGNORE_COOKIE;
  Ref module(Py_CompileStringObject(code.c_str(), filename, Py_file_input, &flags, -1));
  if (!module) return false;
  Ref body(PyObject_GetAttr(module.get(), runtime->body_name));
  if (!body || !PyList_Check(body.get())) return false;
  Py_ssize_t count = PyList_GET_SIZE(body.get());
  Ref expression;
  if (count > 0) {
    PyObject* last = PyList_GET_ITEM(body.get(), count - 1);  // borrowed
    int is_expr = PyObject_IsInstance(last, runtime->ast_expr);
    if (is_expr < 0) return false;
    if (is_expr == 1) {
      Ref value(PyObject_GetAttr(last, runtime->value_name));
      if (!value) return false;
      expression.reset(PyObject_CallOneArg(runtime->ast_expression, value.get()));
      if (!expression || PyList_SetSlice(body.get(), count - 1, count, nullptr) < 0) return false;
    }
  }
  compiled.statements.reset(PyObject_CallFunction(runtime->compile, "OOsii", module.get(),
                                                  filename, "exec", 0, 1));
  if (!compiled.statements) return false;
  if (expression) {
    compiled.trailing.reset(PyObject_CallFunction(runtime->compile, "OOsii", expression.get(),
                                                  filename, "eval", 0, 1));
    if (!compiled.trailing) return false;
  }
  return true;
}

// `text` with the session's own cells named as a Repl names them: every
// "<cell N" + request.session_tag + ">" becomes "<cell N>".
std::string ShownCellNames(std::string text, const CellRequest& request) {
  if (request.session_tag.empty()) return text;
  const std::string suffix = request.session_tag + ">";
  constexpr std::string_view kStart = "<cell ";
  std::size_t at = 0;
  while ((at = text.find(kStart, at)) != std::string::npos) {
    std::size_t end = at + kStart.size();
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    if (end > at + kStart.size() && text.compare(end, suffix.size(), suffix) == 0) {
      text.erase(end, request.session_tag.size());
    }
    at = end;
  }
  return text;
}

// Fills `result` from the exception a cell raised.
void RecordException(PyObject* exc, PyObject* globals, const CellRequest& request,
                     Result& result) {
  if (PyErr_GivenExceptionMatches(exc, PyExc_SystemExit)) {
    Ref code(PyObject_GetAttrString(exc, "code"));
    if (!code) PyErr_Clear();
    if (!code || code.get() == Py_None) return;  // sys.exit() / sys.exit(None): success
    int overflow = 0;
    long value = PyLong_Check(code.get()) ? PyLong_AsLongAndOverflow(code.get(), &overflow) : -1;
    if (PyErr_Occurred()) PyErr_Clear();
    if (PyLong_Check(code.get()) && !overflow && value == 0) return;
    result.ok = false;
    result.error_type = "SystemExit";
    result.exit_code = (PyLong_Check(code.get()) && !overflow && value >= 1 && value <= 255)
                           ? static_cast<int>(value)
                           : kExitFailure;
    result.error = ShortExceptionText(exc) + " (SystemExit caught; the session is kept)";
    return;
  }
  result.ok = false;
  result.error_type = ExceptionTypeName(exc);
  result.exit_code = ExceptionExitCode(exc).value_or(kExitFailure);
  std::string error = ShownCellNames(FormatWithTraceback(exc, "format_exception"), request);
  std::vector<std::string> aliases = request.toolbox_aliases;
  aliases.insert(aliases.end(), request.hidden_names.begin(), request.hidden_names.end());
  if (std::optional<std::string> hint = ToolboxCallHint(exc, globals, aliases)) {
    error += "\n" + *hint;
  }
  result.error = std::move(error);
}

// Runs the compiled cell in `globals`; fills value or error.
void ExecuteCell(const CompiledCell& compiled, PyObject* globals, const CellRequest& request,
                 Result& result) {
  Ref done(compiled.statements ? PyEval_EvalCode(compiled.statements.get(), globals, globals)
                               : Py_NewRef(Py_None));
  if (done && compiled.trailing) {
    Ref value(PyEval_EvalCode(compiled.trailing.get(), globals, globals));
    if (value && value.get() != Py_None) {
      ReprLimits limits;
      limits.max_chars = ValueCap(request);
      if (request.max_repr == 0) {  // no repr bound: only max_output's cut, if any
        limits.max_items = limits.max_string = std::numeric_limits<std::size_t>::max();
        limits.max_depth = std::numeric_limits<int>::max();
      }
      result.value = BoundedRepr(value.get(), limits);
    }
    if (!value) done.reset(nullptr);
  }
  if (done) return;
  Ref exc(TakeRaisedException());
  PyObject* answer = nullptr;
  if (exc && IsFinalAnswer(exc.get(), &answer)) {
    // The cell ended by handing back its answer: a success.
    if (request.returned != nullptr) {
      *request.returned = answer;
    } else {
      Py_DECREF(answer);
    }
    return;
  }
  if (exc) RecordException(exc.get(), globals, request, result);
}

}  // namespace

void RegisterCellSource(std::string_view filename, std::string_view code) {
  CellRuntime* runtime = GetRuntime();
  Ref name(PyUnicode_DecodeUTF8(filename.data(), static_cast<Py_ssize_t>(filename.size()),
                                "strict"));
  if (runtime == nullptr || !name) {
    PyErr_Clear();
    return;
  }
  RegisterSource(runtime, name.get(), code);
}

std::optional<std::string> RegisteredCellSource(std::string_view filename) {
  CellRuntime* runtime = GetRuntime();
  Ref name(PyUnicode_DecodeUTF8(filename.data(), static_cast<Py_ssize_t>(filename.size()),
                                "strict"));
  if (runtime == nullptr || !name) {
    PyErr_Clear();
    return std::nullopt;
  }
  return SourceOf(runtime, name.get());
}

Result RunCell(PyObject* globals, const CellRequest& request) {
  bool is_nul = false;
  if (std::optional<std::size_t> bad = FirstBadByte(request.code, &is_nul)) {
    Result bad_source =
        FailedResult(is_nul ? "cell source contains a NUL byte at offset " + std::to_string(*bad)
                            : "cell source is not valid UTF-8 (bad byte at offset " +
                                  std::to_string(*bad) + "); nothing ran");
    if (!is_nul) bad_source.error_type = "UnicodeDecodeError";
    return bad_source;
  }
  if (globals == nullptr || !PyDict_Check(globals)) return FailedResult("internal: globals is not a dict");
  CellRuntime* runtime = GetRuntime();
  if (runtime == nullptr || !EnsureRouters(runtime)) {
    Ref exc(TakeRaisedException());
    return FailedResult("internal: cannot set up cell I/O: " +
                        (exc ? ShortExceptionText(exc.get()) : std::string("unknown error")));
  }
  if (PyDict_SetDefault(globals, runtime->builtins_key, runtime->builtins) == nullptr) {
    PyErr_Clear();
  }
  std::string filename_text = request.filename.empty() ? "<cell>" : request.filename;
  Ref filename(PyUnicode_FromStringAndSize(filename_text.data(),
                                           static_cast<Py_ssize_t>(filename_text.size())));
  RegisterSource(runtime, filename.get(), request.code);

  Result result;
  CompiledCell compiled;
  if (!CompileCell(runtime, std::string(request.code), filename.get(), compiled)) {
    Ref exc(TakeRaisedException());
    result = FailedResult(exc ? ShownCellNames(FormatWithTraceback(exc.get(), "format_exception_only"), request)
                              : "SyntaxError: the cell could not be compiled");
    result.error_type = exc ? ExceptionTypeName(exc.get()) : "SyntaxError";
  } else {
    EnsureFigures(runtime, /*force=*/false);
    CellCapture capture(request.max_output, request.sink);
    {
      CaptureScope scope(runtime, &capture);
      ExecuteCell(compiled, globals, request, result);
      CollectCellFigures(runtime);
    }
    result.stdout_text = capture.Text();
    result.images = capture.TakeImages();
  }
  if (PyErr_Occurred()) PyErr_Clear();
  if (request.list_held) result.held = HeldNames(globals, request.hidden_names);
  return result;
}

}  // namespace dolsot
