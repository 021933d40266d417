// The one cell-execution routine both backends share (see cell_runner.h):
// check the source, compile it (splitting off a trailing expression), run it
// with its output captured, and turn what happened into a Result. The stdio
// router, the runtime it caches, the figures and the cell sources each have
// their own file (output_router, cell_runtime, cell_figures, cell_sources).
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "embedded/cell_runner.h"
#include "embedded/cell_tools.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>

#include "core/utf8.h"
#include "embedded/bounded_repr.h"
#include "embedded/cell_figures.h"
#include "embedded/cell_runtime.h"
#include "embedded/cell_sources.h"
#include "embedded/output_router.h"
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

// ---------------------------------------------------------------------------
// Small CPython helpers.

std::string TypeNameOf(PyObject* obj) { return Py_TYPE(obj)->tp_name; }

// The class's __name__ (tp_name without the module a static type puts first).
std::string ExceptionTypeName(PyObject* exc) {
  std::string name = TypeNameOf(exc);
  std::size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

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

}  // namespace

std::size_t ValueCap(const CellRequest& request) {
  if (request.max_repr == 0) return request.max_output;
  if (request.max_output == 0) return request.max_repr;
  return std::min(request.max_repr, request.max_output);
}

std::vector<std::string> HeldNames(PyObject* globals, const std::vector<std::string>& hidden) {
  std::vector<std::string> names;
  ForEachStrKey(globals, [&](std::string_view name) {
    if (name.size() >= 4 && name.starts_with("__") && name.ends_with("__")) return true;
    if (std::find(hidden.begin(), hidden.end(), name) != hidden.end()) return true;
    names.emplace_back(name);
    return true;
  });
  return names;
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
