// One run() call's tools and variables from Python (see cell_inputs_from_python.h).
#include "bindings/cell_inputs_from_python.h"

#include <pybind11/functional.h>

#include "embedded/cell_tools.h"

namespace py = pybind11;

namespace dolsot::bindings {

PythonCellInputs::PythonCellInputs(py::handle self, std::string_view session_id,
                                   PyObject* variables, bool live_objects) {
  PyObject* host = PyObject_GetAttrString(self.ptr(), "_dolsot_tools");
  if (host == nullptr) {
    PyErr_Clear();
    host_ = py::none();
  } else {
    host_ = py::reinterpret_steal<py::object>(host);
  }
  if (!host_.is_none()) {
    py::object tools = host_.attr("tools");
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
    py::object final_name = host_.attr("final");
    if (!final_name.is_none()) final_name_ = final_name.cast<std::string>();
    if (live_objects && !names_.empty()) callables_ = host_.attr("callables")();
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
    PyObject* host = host_.ptr();  // kept alive by this object for the run
    options.tools.dispatch = [host](ToolCall call, ToolReplyFn done) {
      py::gil_scoped_acquire gil;
      try {
        auto reply = py::cpp_function([done](bool ok, py::bytes payload) {
          done(ToolReply{ok, std::string(payload)});
        });
        py::handle(host).attr("dispatch")(call.name, py::bytes(call.arguments), reply);
      } catch (py::error_already_set&) {
        done(ToolReply{false, std::string()});  // the session reports the tool as unavailable
      }
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
