// The C functions the host's Python side (dolsot/_tools.py) answers a Repl
// cell's tool calls with: done(ok, payload) for a call handed to a tool
// thread (ToolHost.dispatch), and receive() / reply(ok, payload) for the
// calls of a cell's own tool socket, which one thread reads and runs itself
// (ToolHost.serve_socket; backend_subprocess/tool_socket.h). Plain
// METH_FASTCALL functions over capsules: cheaper per call than pybind11's.
#pragma once

#include <Python.h>

#include "core/cell_inputs.h"
#include "core/unique_fd.h"

namespace dolsot::bindings {

// A new reference to done(ok: bool, payload: bytes), which calls `fn` once
// per call (without the GIL), or nullptr with an error set.
PyObject* NewReplyFunction(ToolReplyFn fn);

// receive() -> (name: str, payload: bytes) | None (the cell is over) and
// reply(ok: bool, payload: bytes), answering the call received last; both
// wait without the GIL and own `socket` together (closed when both are
// gone). False with an error set (the socket is closed).
bool NewToolSocketFunctions(UniqueFd socket, PyObject** receive, PyObject** reply);

}  // namespace dolsot::bindings
