// The one cell-execution routine both backends share: parse, split off the
// trailing expression, compile under a per-cell filename, run with stdout
// captured and stdin empty, format the value and errors, list held names.
//
// Its parts live beside it: output_router.h (InstallCellIo: the stdio
// router), cell_figures.h (InstallFigureBackend), cell_sources.h (the cells'
// sources for tracebacks); cell_runtime.h is what they share.
//
// Every function here needs the calling thread to hold the GIL.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/bounded_text.h"
#include "core/config.h"
#include "core/result.h"
#include "core/status.h"
#include "embedded/output_sink.h"

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

struct CellRequest {
  std::string_view code;     // the cell's source, UTF-8
  std::string filename;      // per-cell filename, e.g. "<cell 3>" (shown in tracebacks)
  // Set when `filename` names the session too, because sessions share this
  // interpreter's linecache (InProcessSession: "<cell 3 of s1>", tag " of
  // s1"): the tracebacks in Result::error drop the tag from this session's
  // cells, so they read "<cell 3>" on both backends.
  std::string session_tag;
  std::size_t max_output = kDefaultMaxOutput;  // caps stdout, and the value too; 0 = no cap
  std::size_t max_repr = kDefaultMaxRepr;      // caps the value's repr; 0 = no cap
  std::vector<std::string> hidden_names;       // never listed in held (toolbox aliases)
  // false: Result::held is left empty. For a caller that already knows the
  // names and a cell proven not to bind any (embedded/read_only_cell.h),
  // which lists them itself if the cell did not complete.
  bool list_held = true;
  OutputSink* sink = nullptr;                  // optional live mirror of stdout
  // Toolbox aliases bound in `globals`, for ToolboxCallHint (hidden_names are
  // passed to it as well).
  std::vector<std::string> toolbox_aliases;
  // Receives a new reference to the value the cell handed to the
  // final-answer function (embedded/cell_tools.h), when it did; the cell then
  // counts as a success.
  PyObject** returned = nullptr;
};

// Runs one cell in `globals` (a dict). Never raises into the caller: a user
// error (syntax error, exception, SystemExit, invalid UTF-8) is a Result with
// ok == false. Does not fill Result::dropped.
Result RunCell(PyObject* globals, const CellRequest& request);

// The names listed in Result::held: every key of `globals` that is not a dunder
// and not in `hidden`, in insertion order.
std::vector<std::string> HeldNames(PyObject* globals, const std::vector<std::string>& hidden);

// The value's cap in characters: the smaller of max_repr and max_output
// where each is set (0 when neither caps it).
std::size_t ValueCap(const CellRequest& request);

}  // namespace dolsot
