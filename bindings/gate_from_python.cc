// One adapter from a Python gate to a core CellGate, shared by both backends
// so a rejected cell reads the same in each. The AST gate of dolsot.sandbox is
// recognised and run in C++ directly (no call back into Python).
#include <pybind11/pybind11.h>

#include "bindings/bindings.h"
#include "embedded/cpython_statements.h"
#include "sandbox/ast_gate.h"

namespace py = pybind11;

namespace dolsot::bindings {
namespace {

// A Python callable held by a C++ std::function: copied and dropped under
// the GIL whatever thread does it.
struct PythonCallable {
  explicit PythonCallable(py::object f) : function(std::move(f)) {}
  PythonCallable(const PythonCallable& other) {
    py::gil_scoped_acquire gil;
    function = other.function;
  }
  PythonCallable& operator=(const PythonCallable&) = delete;
  ~PythonCallable() {
    if (!Py_IsInitialized()) {
      function.release();  // too late to drop it
      return;
    }
    py::gil_scoped_acquire gil;
    function = py::object();
  }
  py::object function;
};

// gate(code) returns findings (empty or None: allowed) or raises (rejected).
CellGate CallPythonGate(py::object gate) {
  auto callable = std::make_shared<PythonCallable>(std::move(gate));
  return [callable](const GateRequest& request) -> GateVerdict {
    py::gil_scoped_acquire gil;
    GateVerdict verdict;
    try {
      py::object findings =
          callable->function(py::str(request.code.data(), request.code.size()));
      if (findings.is_none()) return verdict;
      if (!py::isinstance<py::iterable>(findings) || py::isinstance<py::str>(findings)) {
        if (!py::bool_(findings)) return verdict;
        verdict.allowed = false;
        verdict.message = "rejected by the gate: " + py::str(py::repr(findings)).cast<std::string>();
        return verdict;
      }
      std::string message;
      for (py::handle finding : findings) {
        if (!message.empty()) message += "\n";
        message += py::str(finding).cast<std::string>();
      }
      if (!message.empty()) {
        verdict.allowed = false;
        verdict.message = "rejected by the gate:\n" + message;
      }
    } catch (py::error_already_set& e) {  // the gate failed: fail closed
      verdict.allowed = false;
      verdict.message = std::string("rejected: the gate raised ") + e.what();
    }
    return verdict;
  };
}

// The C++ gate when `gate` is dolsot.sandbox's check_ast or an AstGate.
std::optional<CellGate> NativeAstGate(const py::object& gate) {
  py::object sandbox = py::module_::import("dolsot._dolsot").attr("_sandbox");
  sandbox::Policy policy = sandbox::DefaultPolicy();
  py::object ast_gate_type = py::module_::import("dolsot.sandbox").attr("AstGate");
  if (py::isinstance(gate, ast_gate_type) && py::hasattr(gate, "policy")) {
    policy = gate.attr("policy").cast<sandbox::Policy>();
  } else if (!gate.is(sandbox.attr("check_ast"))) {
    return std::nullopt;
  }
  policy.statement_oracle = CpythonStatementOracle();
  return MakeAstGate(std::move(policy));
}

}  // namespace

sandbox::StatementOracle CpythonStatementOracle() {
  return [](std::string_view code) -> StatusOr<std::vector<sandbox::StatementStart>> {
    StatusOr<std::vector<CpythonStatementStart>> starts = CpythonStatementStarts(code);
    if (!starts.ok()) return starts.status();
    std::vector<sandbox::StatementStart> out;
    out.reserve(starts->size());
    for (const CpythonStatementStart& start : *starts) out.push_back({start.line, start.column});
    return out;
  };
}


HostGates GatesFromPython(py::object gate) {
  HostGates gates;
  if (gate.is_none()) return gates;
  if (!PyCallable_Check(gate.ptr())) {
    ThrowStatus(InvalidArgument("gate must be callable: gate(code) -> findings"));
  }
  if (std::optional<CellGate> native = NativeAstGate(gate)) {
    gates.ast_gate = *std::move(native);
  } else {
    gates.caller_gate = CallPythonGate(std::move(gate));
  }
  return gates;
}

}  // namespace dolsot::bindings
