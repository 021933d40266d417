// Host tools inside a session: binds tools and the final-answer function as
// the session's builtins, recognises the final answer when a cell ends with
// it, and holds a Python object for a Result (PyObjectHandle). The Python
// glue both backends share; how a call reaches the host is the backend's.
//
// Every function here needs the calling thread to hold the GIL, except the
// handle's deleter, which takes it.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/cell_inputs.h"
#include "core/result.h"
#include "core/status.h"

namespace dolsot {

// A strong reference to a Python object that a Result carries (the value a
// cell handed to the final-answer function, in-process). Released under the
// GIL, from any thread.
struct PyObjectHandle {
  PyObject* object = nullptr;
};
std::shared_ptr<PyObjectHandle> HoldPyObject(PyObject* object);  // takes a new reference

// Binds `tools` into `builtins` (a dict: the session's own builtins): each
// name to tools.callables[name] when callables is set (in-process), else to a
// stub that calls `transport(name, args, kwargs, failed)` (a session
// process), which pickles the arguments, calls the host and returns the
// unpickled result, or returns failed(args, kwargs, error, reply): the
// stub's function that raises the error the cell sees. The final-answer function, when
// named, raises a BaseException that RunCell turns into a successful end with
// Result::returned. Names bound before and absent now are removed. Cheap when
// nothing changed. A Python error is returned as a Status (cleared).
Status BindCellTools(PyObject* builtins, const CellTools& tools, PyObject* transport);

// Whether `value` is a stub BindCellTools made for a session process, as
// made: the glue's `tool` code (no other function, and no function a cell
// built from that code with a closure of its own), calling the transport
// the stubs were bound with, for a tool named by a str. Such a stub runs
// nothing of the session's but that transport (it reads no global), which
// is C (backend_subprocess/tool_channel.h). Needs the GIL.
bool IsHostToolStub(PyObject* value);

// Whether `exc` is the final-answer function's exception; if so, *value gets a
// new reference to what the cell handed back.
bool IsFinalAnswer(PyObject* exc, PyObject** value);

// Pickles `value` (protocol 5) for the host, as a final answer travels; an
// error naming the value's type when it cannot be pickled.
StatusOr<std::string> PickleForHost(PyObject* value);

// Unpickles bytes the host sent (trusted: the host is the caller), as a new
// reference, or a Status naming the failure. `*plainly` (when given): the
// bytes were a plain pickle (core/pickle_budget.h) and pickle.loads was
// _pickle's, so loading them ran no code and made plain values only.
StatusOr<PyObject*> UnpickleFromHost(std::string_view bytes, bool* plainly = nullptr);

// Whether `function` is _pickle's function `name`: a C function of a
// module made from _pickle's own definition (only C makes such a module,
// and only _pickle's table gives it a function by that name). Its `dumps`
// writes what PicklesByItself (plain_values.h) accepts, and its `loads`
// reads a plain pickle, without running code; a cell may have put other
// functions in the pickle module. Needs the GIL.
bool IsPickleFunction(PyObject* function, const char* name);

}  // namespace dolsot
