// The per-interpreter state RunCell and its helpers share (internal to
// embedded/): the capture a running cell writes into, reached through a
// per-thread slot, and CellRuntime, the cached objects a cell's set-up would
// otherwise look up each time. The stdio router (output_router.h), the figure
// hook-up (cell_figures.h) and the cell sources (cell_sources.h) read it.
//
// Every function here needs the calling thread to hold the GIL.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/bounded_text.h"
#include "embedded/output_sink.h"

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

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
  virtual void AddImage(std::string png) {
    if (sink_ != nullptr) sink_->Image(png);
    images_.push_back(std::move(png));
  }
  std::vector<std::string> TakeImages() { return std::move(images_); }

 private:
  BoundedText text_;
  OutputSink* sink_;
  std::vector<std::string> images_;
};

// The calling thread's slot: the capture of the cell it runs, or nullptr.
CellCapture*& CurrentCaptureSlot();

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

// This interpreter's runtime, made on first use; nullptr with a Python error
// set when it cannot be made.
CellRuntime* GetRuntime();

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

}  // namespace dolsot
