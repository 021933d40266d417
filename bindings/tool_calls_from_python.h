// The C functions the host's Python side (dolsot/_tools.py) answers a Repl
// cell's tool calls with: done(ok, payload) for a call handed to a tool
// thread (ToolHost.dispatch), and serve(host, names, reply) / reply(ok,
// payload) for the calls of a cell's own tool pipes, which one thread reads
// and runs itself (ToolHost.serve_pipes; a ToolCallPipe, core/cell_inputs.h).
// serve is the whole receive / run / reply loop in C: per call it takes the
// GIL once, decodes a plain pickle (plain_pickle.h) with pickle.loads, calls
// the tool and pickles its result; what it cannot take that way (a pickle
// that names something, an awaitable or unpicklable result) goes to the
// host's Python (ToolHost._call, ToolHost._answer). Plain METH_FASTCALL
// functions over capsules: cheaper per call than pybind11's.
#pragma once

#include <Python.h>

#include "core/cell_inputs.h"
#include <memory>


namespace dolsot::bindings {

// A new reference to done(ok: bool, payload: bytes), which calls `fn` once
// per call (without the GIL), or nullptr with an error set.
PyObject* NewReplyFunction(ToolReplyFn fn);

// serve(host: ToolHost, names: frozenset, reply) -> None, answering the
// cell's calls of the tools in `names` until the cell is over, and
// reply(ok: bool, payload: bytes), answering the call received last (for
// the host's Python paths); both wait without the GIL until the cell is
// over, and own `pipe` together (closed when both are gone). Both must be
// called on one thread, the one serve runs on. False with an error set (the
// pipe is closed).
bool NewToolPipesFunctions(std::unique_ptr<ToolCallPipe> pipe, PyObject** serve,
                           PyObject** reply);

}  // namespace dolsot::bindings
