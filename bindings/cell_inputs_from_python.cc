// One run() call's tools and variables from Python (see cell_inputs_from_python.h).
#include "bindings/cell_inputs_from_python.h"


#include "bindings/tool_calls_from_python.h"
#include "embedded/cell_tools.h"
#include "embedded/interned_name.h"

namespace py = pybind11;

namespace dolsot::bindings {
namespace {

// Read on every run() call (embedded/interned_name.h: a name made from a C
// literal per call cost 11-18 µs of the host's path with the caches cold).
constinit const InternedName kToolHostName("_dolsot_tools");
constinit const InternedName kToolsName("tools");
constinit const InternedName kFinalName("final");

py::object AttrOrThrow(py::handle obj, const InternedName& name) {
  PyObject* key = name.get();
  PyObject* value = key != nullptr ? PyObject_GetAttr(obj.ptr(), key) : nullptr;
  if (value == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(value);
}

}  // namespace

PythonCellInputs::PythonCellInputs(py::handle self, std::string_view session_id,
                                   PyObject* variables, bool live_objects) {
  PyObject* host_key = kToolHostName.get();
  PyObject* host = host_key != nullptr ? PyObject_GetAttr(self.ptr(), host_key) : nullptr;
  if (host == nullptr) {
    PyErr_Clear();
    host_ = py::none();
  } else {
    host_ = py::reinterpret_steal<py::object>(host);
  }
  if (!host_.is_none()) {
    py::object tools = AttrOrThrow(host_, kToolsName);
    if (!py::isinstance<py::dict>(tools)) {
      throw py::type_error("backend.tools must be a dict of names to callables");
    }
    for (auto item : py::reinterpret_borrow<py::dict>(tools)) {
      if (!py::isinstance<py::str>(item.first)) {
        throw py::type_error("backend.tools: a tool's name must be a str");
      }
      if (!PyCallable_Check(item.second.ptr())) {
        throw py::type_error("backend.tools['" + item.first.cast<std::string>() +
                             "'] is not callable");
      }
      names_.push_back(item.first.cast<std::string>());
    }
    py::object final_name = AttrOrThrow(host_, kFinalName);
    if (!final_name.is_none()) final_name_ = final_name.cast<std::string>();
    if (live_objects && !names_.empty()) callables_ = host_.attr("callables")();
    if (!live_objects && !names_.empty()) {
      dispatch_ = host_.attr("dispatch");
      serve_pipes_ = host_.attr("serve_pipes");
    }
  }
  if (variables != nullptr) {
    py::dict given = py::reinterpret_borrow<py::dict>(variables);
    py::object encoder = host_.is_none() ? py::object() : host_.attr("encode_variable");
    for (auto item : given) {
      if (!py::isinstance<py::str>(item.first)) {
        throw py::type_error("run() variables: every name must be a str, not " +
                             std::string(Py_TYPE(item.first.ptr())->tp_name));
      }
      CellVariable v;
      v.name = item.first.cast<std::string>();
      if (live_objects) {
        v.object = item.second.ptr();
        kept_.push_back(py::reinterpret_borrow<py::object>(item.second));
      } else {
        if (!encoder) encoder = py::module_::import("dolsot._tools").attr("encode_variable");
        py::tuple encoded = encoder(session_id, item.first, item.second);
        v.pickle = std::make_shared<const std::string>(encoded[0].cast<std::string>());
        v.digest = encoded[1].cast<std::string>();
      }
      variables_.push_back(std::move(v));
    }
  }
}

void PythonCellInputs::Fill(RunOptions& options) const {
  options.tools.names = names_;
  options.tools.final_name = final_name_;
  options.tools.callables = callables_ ? callables_.ptr() : nullptr;
  options.variables = variables_;
  if (!names_.empty() && !callables_) {
    // Called on the run's thread without the GIL; `done` may come from any
    // thread, after the cell is gone.
    PyObject* dispatch = dispatch_.ptr();  // kept alive by this object for the run
    options.tools.dispatch = [dispatch](ToolCall call, ToolReplyFn done) {
      PyGILState_STATE gil = PyGILState_Ensure();
      PyObject* name = PyUnicode_FromStringAndSize(call.name.data(),
                                                   static_cast<Py_ssize_t>(call.name.size()));
      PyObject* payload = PyBytes_FromStringAndSize(
          call.arguments.data(), static_cast<Py_ssize_t>(call.arguments.size()));
      PyObject* reply = NewReplyFunction(done);
      PyObject* session = PyUnicode_FromStringAndSize(
          call.session_id.data(), static_cast<Py_ssize_t>(call.session_id.size()));
      PyObject* returned = nullptr;
      if (name != nullptr && payload != nullptr && reply != nullptr && session != nullptr) {
        PyObject* args[] = {name, payload, reply, session};
        returned = PyObject_Vectorcall(dispatch, args, 4, nullptr);
      }
      Py_XDECREF(session);
      Py_XDECREF(name);
      Py_XDECREF(payload);
      Py_XDECREF(reply);
      if (returned == nullptr) {
        PyErr_Clear();
        done(ToolReply{false, std::string()});  // the session reports the tool as unavailable
      }
      Py_XDECREF(returned);
      PyGILState_Release(gil);
    };
    // Called on the run's thread without the GIL, at most once per cell.
    PyObject* serve = serve_pipes_.ptr();
    const std::vector<std::string>* tool_names = &names_;  // lives as long as this object
    options.tools.serve_pipes = [serve, tool_names](std::unique_ptr<ToolCallPipe> pipe,
                                                    std::string_view session_id) {
      PyGILState_STATE gil = PyGILState_Ensure();
      PyObject* serve_calls = nullptr;
      PyObject* reply = nullptr;
      bool served = false;
      PyObject* names = PyTuple_New(static_cast<Py_ssize_t>(tool_names->size()));
      for (std::size_t i = 0; names != nullptr && i < tool_names->size(); ++i) {
        PyObject* name = PyUnicode_FromStringAndSize((*tool_names)[i].data(),
                                                     static_cast<Py_ssize_t>((*tool_names)[i].size()));
        if (name == nullptr) Py_CLEAR(names);
        else PyTuple_SET_ITEM(names, static_cast<Py_ssize_t>(i), name);
      }
      if (names != nullptr && NewToolPipesFunctions(std::move(pipe), &serve_calls, &reply)) {
        PyObject* session = PyUnicode_FromStringAndSize(session_id.data(),
                                                        static_cast<Py_ssize_t>(session_id.size()));
        if (session != nullptr) {
          PyObject* args[] = {serve_calls, reply, session, names};
          PyObject* returned = PyObject_Vectorcall(serve, args, 4, nullptr);
          served = returned != nullptr;
          Py_XDECREF(returned);
          Py_DECREF(session);
        }
      }
      Py_XDECREF(names);
      // Not served: the pipes close with the functions, and the session's
      // call there fails.
      if (!served) PyErr_Clear();
      Py_XDECREF(serve_calls);
      Py_XDECREF(reply);
      PyGILState_Release(gil);
      return served;
    };
  }
}

void PythonCellInputs::DecodeReturned(Result& result) const {
  if (!result.returned || result.returned->object || host_.is_none()) return;
  try {
    py::object value =
        host_.attr("decode_returned")(py::bytes(result.returned->pickle));
    result.returned->object = HoldPyObject(value.ptr());
  } catch (py::error_already_set& error) {
    result.returned.reset();
    result.ok = false;
    result.exit_code = kExitFailure;
    result.SetOutcome(Outcome::kError);
    result.error_type = "UnpicklingError";
    // The exception's own message: the host's traceback is not the agent's business.
    std::string message = "UnpicklingError: the cell's final answer was refused by the host: ";
    message += py::str(error.value()).cast<std::string>();
    result.error = result.error ? *result.error + "\n" + message : message;
  }
}

}  // namespace dolsot::bindings
