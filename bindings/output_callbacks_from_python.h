// run(..., on_output=, on_image=): the caller's Python callables as the
// core's OutputCallbacks (core/live_output.h), called on dolsot's delivery
// thread with the GIL taken there. An exception a callable raises is logged
// once per run() (logger "dolsot") and the cell goes on.
#pragma once

#include <Python.h>

#include "core/live_output.h"

namespace dolsot::bindings {

// Needs the GIL. `on_output` and `on_image` are callables or nullptr; the
// result holds strong references, dropped under the GIL by whichever thread
// lets the last copy go (nothing once the interpreter is finalized).
OutputCallbacks OutputCallbacksFromPython(PyObject* on_output, PyObject* on_image);

}  // namespace dolsot::bindings
