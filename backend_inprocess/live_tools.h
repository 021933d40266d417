// In-process host tools when the caller streams the cell's output
// (RunOptions::live): each tool is wrapped so that the output the cell wrote
// before the call reaches on_output before the tool runs (a cell that
// prints, calls a tool and prints again is seen in that order).
//
// Needs the GIL.
#pragma once

#include <memory>

#include "core/live_output_stream.h"

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

// A new dict: each name of `callables` (a dict of name -> callable) to a
// callable that waits (GIL released) for `stream` to deliver what came
// before, then calls the tool with the same arguments. nullptr with a
// Python error set on failure.
PyObject* ToolsFlushingOutputFirst(PyObject* callables, std::shared_ptr<LiveOutputStream> stream);

}  // namespace dolsot
