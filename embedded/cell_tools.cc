// Host tools inside a session: the Python glue (tool stubs, the final-answer
// function and its exception, exceptions rebuilt from the host's reply) and
// their binding into a session's builtins.
#include "embedded/cell_tools.h"

#include <Python.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstring>

#include "core/pickle_budget.h"
#include "embedded/interned_name.h"
#include "embedded/py_ref.h"

namespace py = pybind11;

namespace dolsot {
namespace {

// Runs in a private module scope, once per interpreter. Values cross as
// pickles: a tool's arguments go to the host (which decodes them as hostile),
// its result and exceptions come back from the host (trusted: the caller).
constexpr char kGlueSource[] = R"PY(
import pickle as _pickle

class FinalAnswer(BaseException):
    """The final-answer function's way out of a cell: not an error."""

class ToolError(Exception):
    """A host tool's exception whose own class could not cross to the cell."""

def _type_name(value):
    kind = type(value)
    module = getattr(kind, '__module__', None)
    name = getattr(kind, '__qualname__', kind.__name__)
    return name if module in (None, '', 'builtins') else module + '.' + name

def _culprit(args, kwargs):
    for value in list(args) + list(kwargs.values()):
        try:
            _pickle.dumps(value, 5)
        except Exception:
            return 'a value of type ' + _type_name(value)
    return 'an argument'

def make_final(name):
    def final(*args, **kwargs):
        if args and kwargs:
            raise TypeError(name + '() takes positional or keyword arguments, not both')
        raise FinalAnswer(args[0] if len(args) == 1 else (args if args else kwargs))
    final.__name__ = final.__qualname__ = name
    final.__doc__ = (name + '(value) or ' + name + '(**fields): ends the cell and hands '
                     'the value to the host as data (Result.returned).')
    final.__dolsot_final__ = True
    return final

def rebuild(reply):
    info = _pickle.loads(reply)
    exc = None
    if info.get('exception') is not None:
        try:
            exc = _pickle.loads(info['exception'])
        except Exception:
            exc = None
    if not isinstance(exc, BaseException):
        kind = type(str(info.get('type') or 'ToolError'), (ToolError,),
                    {'__module__': str(info.get('module') or 'builtins')})
        exc = kind(str(info.get('message', '')))
        if info.get('exit_code') is not None:
            exc.exit_code = info['exit_code']
    return exc

def make_remote(name, transport):
    # transport (C: backend_subprocess/tool_channel.h) pickles, calls and
    # unpickles; it returns failed(...) on every other outcome, which raises.
    def failed(args, kwargs, error, reply):
        if error is not None:
            raise TypeError('tool ' + name + '(): ' + _culprit(args, kwargs) +
                            ' cannot be sent to the host (it cannot be pickled: ' +
                            str(error) + ')') from None
        if not reply:
            raise LookupError('tool ' + name + '() is not available in the host any more')
        raise rebuild(reply) from None
    def tool(*args, **kwargs):
        return transport(name, args, kwargs, failed)
    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = 'Host tool ' + name + ': runs in the host; values cross as pickles.'
    return tool
)PY";

constexpr const char* kGlueKey = "dolsot.cell_tools.v1";
constexpr const char* kBoundKey = "__dolsot_tools__";  // builtins[...]: names bound

// What IsHostToolStub compares with (per process; forks inherit them):
// make_remote's `tool` code as the glue's source compiles to it, where its
// closure holds `name` and `transport`, and the transport the stubs were
// made with. Strong references, never released.
struct StubShape {
  PyObject* code = nullptr;
  Py_ssize_t cells = 0;
  Py_ssize_t name_cell = -1;
  Py_ssize_t transport_cell = -1;
};
StubShape g_stub;
PyObject* g_transport = nullptr;

// The code object named `name` among `code`'s constants (borrowed), or null.
PyObject* ConstantCode(PyObject* code, const char* name) {
  Ref consts(PyObject_GetAttrString(code, "co_consts"));
  if (!consts || !PyTuple_Check(consts.get())) return nullptr;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(consts.get()); ++i) {
    PyObject* item = PyTuple_GET_ITEM(consts.get(), i);
    if (!PyCode_Check(item)) continue;
    Ref item_name(PyObject_GetAttrString(item, "co_name"));
    if (item_name && PyUnicode_Check(item_name.get()) &&
        PyUnicode_CompareWithASCIIString(item_name.get(), name) == 0) {
      return item;
    }
  }
  return nullptr;
}

// Reads the stub's shape off the glue module's compiled code (what the
// source says, whatever ran since: nothing a cell bound is asked).
void LearnStubShape(PyObject* module_code) {
  PyObject* make_remote = ConstantCode(module_code, "make_remote");
  PyObject* tool = make_remote != nullptr ? ConstantCode(make_remote, "tool") : nullptr;
  Ref freevars(tool != nullptr ? PyObject_GetAttrString(tool, "co_freevars") : nullptr);
  if (!freevars || !PyTuple_Check(freevars.get())) {
    PyErr_Clear();
    return;
  }
  StubShape shape;
  shape.cells = PyTuple_GET_SIZE(freevars.get());
  for (Py_ssize_t i = 0; i < shape.cells; ++i) {
    PyObject* var = PyTuple_GET_ITEM(freevars.get(), i);
    if (PyUnicode_CompareWithASCIIString(var, "name") == 0) shape.name_cell = i;
    if (PyUnicode_CompareWithASCIIString(var, "transport") == 0) shape.transport_cell = i;
  }
  if (shape.name_cell < 0 || shape.transport_cell < 0) return;
  shape.code = Py_NewRef(tool);
  g_stub = shape;
}

// The glue's scope for this interpreter (kept in its state dict). Compiled
// and run through the C API: no builtin a cell may have replaced
// (compile, exec) is called.
py::dict Glue() {
  PyObject* state = PyInterpreterState_GetDict(PyInterpreterState_Get());
  if (state == nullptr) throw py::error_already_set();
  PyObject* found = PyDict_GetItemString(state, kGlueKey);  // borrowed
  if (found != nullptr) return py::reinterpret_borrow<py::dict>(found);
  py::dict scope;
  scope["__builtins__"] = py::module_::import("builtins");
  scope["__name__"] = "dolsot_cell_tools";
  // Named so a traceback through a tool stub says what it is.
  Ref code(Py_CompileString(kGlueSource, "<dolsot host tools>", Py_file_input));
  if (!code) throw py::error_already_set();
  if (g_stub.code == nullptr) LearnStubShape(code.get());
  Ref done(PyEval_EvalCode(code.get(), scope.ptr(), scope.ptr()));
  if (!done) throw py::error_already_set();
  if (PyDict_SetItemString(state, kGlueKey, scope.ptr()) < 0) throw py::error_already_set();
  return scope;
}

}  // namespace

std::shared_ptr<PyObjectHandle> HoldPyObject(PyObject* object) {
  Py_XINCREF(object);
  return std::shared_ptr<PyObjectHandle>(new PyObjectHandle{object}, [](PyObjectHandle* handle) {
    if (handle->object != nullptr && Py_IsInitialized()) {
      PyGILState_STATE gil = PyGILState_Ensure();
      Py_DECREF(handle->object);
      PyGILState_Release(gil);
    }
    delete handle;
  });
}

Status BindCellTools(PyObject* builtins, const CellTools& tools, PyObject* transport) {
  try {
    py::dict scope_builtins = py::reinterpret_borrow<py::dict>(builtins);
    // Looked up on every cell (interned_name.h).
    static constinit const InternedName kBound(kBoundKey);
    PyObject* bound_key = kBound.get();
    if (bound_key == nullptr) throw py::error_already_set();
    PyObject* bound_now = PyDict_GetItemWithError(builtins, bound_key);  // borrowed
    if (bound_now == nullptr && PyErr_Occurred()) throw py::error_already_set();
    if (bound_now == nullptr && tools.empty()) return Status::Ok();  // the common case
    std::vector<std::string> previous;
    if (bound_now != nullptr) {
      for (py::handle name : py::reinterpret_borrow<py::tuple>(bound_now)) {
        previous.push_back(name.cast<std::string>());
      }
    }
    auto was_bound = [&](const std::string& name) {
      return std::find(previous.begin(), previous.end(), name) != previous.end();
    };
    py::dict glue;
    auto glue_scope = [&]() -> py::dict& {
      if (glue.empty()) glue = Glue();
      return glue;
    };
    py::tuple wanted(tools.names.size() + (tools.final_name.empty() ? 0 : 1));
    std::size_t i = 0;
    for (const std::string& name : tools.names) {
      wanted[i++] = py::str(name);
      if (tools.callables != nullptr) {
        PyObject* callable = PyDict_GetItemString(tools.callables, name.c_str());  // borrowed
        if (callable == nullptr) return InvalidArgument("tool '" + name + "' has no callable");
        PyObject* current = PyDict_GetItemString(builtins, name.c_str());
        if (current != callable) scope_builtins[py::str(name)] = py::handle(callable);
      } else if (!was_bound(name)) {
        if (transport == nullptr) return InvalidArgument("tool '" + name + "' has no transport");
        if (g_transport != transport) Py_XSETREF(g_transport, Py_NewRef(transport));
        scope_builtins[py::str(name)] =
            glue_scope()["make_remote"](name, py::handle(transport));
      }
    }
    if (!tools.final_name.empty()) {
      wanted[i++] = py::str(tools.final_name);
      PyObject* current = PyDict_GetItemString(builtins, tools.final_name.c_str());
      if (!was_bound(tools.final_name) || current == nullptr ||
          !PyObject_HasAttrString(current, "__dolsot_final__")) {
        scope_builtins[py::str(tools.final_name)] = glue_scope()["make_final"](tools.final_name);
      }
    }
    for (const std::string& name : previous) {
      bool still = std::find(tools.names.begin(), tools.names.end(), name) != tools.names.end() ||
                   name == tools.final_name;
      if (!still && PyDict_DelItemString(builtins, name.c_str()) < 0) PyErr_Clear();
    }
    if (wanted.empty()) {
      if (PyDict_DelItemString(builtins, kBoundKey) < 0) PyErr_Clear();
    } else {
      scope_builtins[kBoundKey] = wanted;
    }
    return Status::Ok();
  } catch (py::error_already_set& error) {
    return Status(ErrorCode::kInternal, std::string("cannot bind the host tools: ") + error.what());
  }
}

bool IsHostToolStub(PyObject* value) {
  if (g_stub.code == nullptr || g_transport == nullptr || !PyFunction_Check(value)) return false;
  if (PyFunction_GET_CODE(value) != g_stub.code) return false;
  PyObject* closure = PyFunction_GET_CLOSURE(value);  // borrowed; a tuple no cell can swap
  if (closure == nullptr || !PyTuple_Check(closure) || PyTuple_GET_SIZE(closure) != g_stub.cells) {
    return false;
  }
  // A cell's contents can be set from Python (cell_contents): read them now.
  PyObject* transport = PyTuple_GET_ITEM(closure, g_stub.transport_cell);
  PyObject* name = PyTuple_GET_ITEM(closure, g_stub.name_cell);
  return PyCell_Check(transport) && PyCell_GET(transport) == g_transport && PyCell_Check(name) &&
         PyCell_GET(name) != nullptr && PyUnicode_CheckExact(PyCell_GET(name));
}

bool IsFinalAnswer(PyObject* exc, PyObject** value) {
  PyObject* state = PyInterpreterState_GetDict(PyInterpreterState_Get());
  PyObject* glue = state != nullptr ? PyDict_GetItemString(state, kGlueKey) : nullptr;
  if (glue == nullptr) return false;  // no final-answer function was ever bound
  PyObject* kind = PyDict_GetItemString(glue, "FinalAnswer");  // borrowed
  if (kind == nullptr || !PyObject_TypeCheck(exc, reinterpret_cast<PyTypeObject*>(kind))) {
    return false;
  }
  PyObject* args = PyObject_GetAttrString(exc, "args");
  if (args == nullptr) {
    PyErr_Clear();
    *value = Py_NewRef(Py_None);
  } else {
    *value = Py_NewRef(PyTuple_Check(args) && PyTuple_GET_SIZE(args) > 0 ? PyTuple_GET_ITEM(args, 0)
                                                                         : Py_None);
    Py_DECREF(args);
  }
  return true;
}

StatusOr<std::string> PickleForHost(PyObject* value) {
  try {
    py::bytes data = py::module_::import("pickle").attr("dumps")(py::handle(value), 5);
    return std::string(data);
  } catch (py::error_already_set& error) {
    std::string type = py::str(py::handle(reinterpret_cast<PyObject*>(Py_TYPE(value)))
                                   .attr("__qualname__"));
    return InvalidArgument("a value of type " + type +
                           " cannot be sent to the host (it cannot be pickled: " +
                           std::string(error.what()) + ")");
  }
}

bool IsPickleFunction(PyObject* function, const char* name) {
  if (function == nullptr || !PyCFunction_Check(function)) return false;
  PyObject* module = PyCFunction_GET_SELF(function);
  if (module == nullptr || !PyModule_Check(module)) return false;
  PyModuleDef* def = PyModule_GetDef(module);
  const PyMethodDef* method = reinterpret_cast<PyCFunctionObject*>(function)->m_ml;
  return def != nullptr && def->m_name != nullptr && std::strcmp(def->m_name, "_pickle") == 0 &&
         method != nullptr && method->ml_name != nullptr && std::strcmp(method->ml_name, name) == 0;
}

StatusOr<PyObject*> UnpickleFromHost(std::string_view bytes, bool* plainly) {
  try {
    py::object loads = py::module_::import("pickle").attr("loads");
    if (plainly != nullptr) *plainly = IsPickleFunction(loads.ptr(), "loads") && IsPlainPickle(bytes);
    py::object value = loads(py::bytes(bytes.data(), bytes.size()));
    return value.release().ptr();
  } catch (py::error_already_set& error) {
    return Status(ErrorCode::kCorrupt, std::string("cannot unpickle what the host sent: ") +
                                           error.what());
  }
}

}  // namespace dolsot
