// The tools and variables of one run() call, gathered from the backend's
// Python side (the ToolHost its constructor keeps as `_dolsot_tools`,
// dolsot/_tools.py) and the call's `variables` dict, and the final answer a
// Repl cell sends back, decoded by that host's unpickling policy.
#pragma once

#include <pybind11/pybind11.h>

#include <string_view>
#include <vector>

#include "core/backend.h"

namespace dolsot::bindings {

class PythonCellInputs {
 public:
  // Needs the GIL. `variables` is a dict or nullptr. Raises (a Python error)
  // for a variable that cannot be sent to a Repl session.
  PythonCellInputs(pybind11::handle self, std::string_view session_id, PyObject* variables,
                   bool live_objects);
  PythonCellInputs(const PythonCellInputs&) = delete;
  PythonCellInputs& operator=(const PythonCellInputs&) = delete;

  // Fills options.tools and options.variables; what they borrow lives as long
  // as this object.
  void Fill(RunOptions& options) const;
  // With the GIL, after the run: a Repl cell's pickled final answer becomes
  // the object Result.returned gives, or the Result a failure naming why it
  // was refused.
  void DecodeReturned(Result& result) const;

 private:
  pybind11::object host_;       // the ToolHost, or None
  pybind11::object callables_;  // in-process: name -> callable (a dict)
  pybind11::object dispatch_;   // Repl: the host's dispatch(name, payload, done, session_id)
  // Repl: the host's serve_pipes(serve, reply, session_id, names)
  pybind11::object serve_pipes_;
  std::vector<std::string> names_;
  std::string final_name_;
  std::vector<CellVariable> variables_;
  std::vector<pybind11::object> kept_;  // keeps the variables' values alive
};

}  // namespace dolsot::bindings
