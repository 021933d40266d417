// The AST gate for Python: check_ast, Policy and Finding (dolsot._dolsot._sandbox,
// re-exported by dolsot.sandbox).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings/bindings.h"
#include "sandbox/check_cell.h"
#include "sandbox/rules.h"

namespace py = pybind11;

namespace dolsot::bindings {
namespace {

using sandbox::Finding;
using sandbox::NameSet;
using sandbox::Policy;

NameSet NamesFrom(const py::handle& iterable, const char* what) {
  if (py::isinstance<py::str>(iterable)) {
    throw py::type_error(std::string(what) + " must be an iterable of names, not a str");
  }
  NameSet names;
  for (const py::handle& item : py::iter(iterable)) {
    if (!py::isinstance<py::str>(item)) {
      throw py::type_error(std::string(what) + " must hold str, got " +
                           std::string(py::str(py::type::of(item).attr("__name__"))));
    }
    std::string name = item.cast<std::string>();
    if (name.empty()) throw py::value_error(std::string(what) + " holds an empty name");
    names.insert(std::move(name));
  }
  return names;
}

// toolboxes: {alias: module or module name} or an iterable of aliases.
void AddToolboxes(Policy& policy, const py::object& toolboxes) {
  if (toolboxes.is_none()) return;
  if (!py::isinstance<py::dict>(toolboxes) && !py::hasattr(toolboxes, "items")) {
    for (const std::string& alias : NamesFrom(toolboxes, "toolboxes")) {
      policy.AllowToolbox(alias, alias);
    }
    return;
  }
  for (const py::handle& pair : toolboxes.attr("items")()) {
    py::tuple item = py::reinterpret_borrow<py::tuple>(pair);
    if (!py::isinstance<py::str>(item[0])) throw py::type_error("toolbox aliases must be str");
    py::object module = item[1];
    std::string module_name;
    if (py::isinstance<py::str>(module)) {
      module_name = module.cast<std::string>();
    } else if (py::isinstance(module, py::module_::import("types").attr("ModuleType"))) {
      module_name = module.attr("__name__").cast<std::string>();
    } else {
      throw py::type_error("toolbox " + item[0].cast<std::string>() +
                           " must map to a module or a module name");
    }
    policy.AllowToolbox(item[0].cast<std::string>(), module_name);
  }
}

Policy MakePolicy(const py::object& allowed_modules, const py::object& denied_names,
                  const py::object& allowed_dunders, const py::object& toolboxes,
                  std::size_t max_source_bytes, std::size_t max_findings,
                  bool private_in_plain_methods) {
  Policy policy = sandbox::DefaultPolicy();
  policy.statement_oracle = CpythonStatementOracle();
  if (!allowed_modules.is_none()) policy.allowed_modules = NamesFrom(allowed_modules, "allowed_modules");
  policy.denied_names = NamesFrom(denied_names, "denied_names");
  if (!allowed_dunders.is_none()) policy.allowed_dunders = NamesFrom(allowed_dunders, "allowed_dunders");
  AddToolboxes(policy, toolboxes);
  if (max_findings == 0) throw py::value_error("max_findings must be at least 1");
  policy.max_source_bytes = max_source_bytes;
  policy.max_findings = max_findings;
  policy.private_in_plain_methods = private_in_plain_methods;
  return policy;
}

py::frozenset FrozenSet(const NameSet& names) {
  py::set out;
  for (const std::string& name : names) out.add(py::str(name));
  return py::frozenset(out);
}

// The cell's UTF-8 bytes. A str that cannot be encoded (lone surrogates) is
// passed on with "surrogatepass", so the gate reports it as invalid UTF-8.
std::string CodeBytes(const py::handle& code) {
  if (py::isinstance<py::bytes>(code)) return code.cast<std::string>();
  if (!py::isinstance<py::str>(code)) {
    throw py::type_error("code must be str or bytes, not " +
                         std::string(py::str(py::type::of(code).attr("__name__"))));
  }
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(code.ptr(), &size);
  if (data != nullptr) return std::string(data, static_cast<std::size_t>(size));
  PyErr_Clear();
  return code.attr("encode")("utf-8", "surrogatepass").cast<std::string>();
}

const Policy& DefaultPolicyInstance() {
  static const Policy policy = [] {
    Policy p = sandbox::DefaultPolicy();
    p.statement_oracle = CpythonStatementOracle();
    return p;
  }();
  return policy;
}

std::vector<Finding> CheckAst(const py::handle& code, const Policy* policy) {
  std::string bytes = CodeBytes(code);
  const Policy& used = policy != nullptr ? *policy : DefaultPolicyInstance();
  py::gil_scoped_release release;  // Policy is immutable from Python
  return sandbox::CheckCell(bytes, used);
}

std::string FindingRepr(const Finding& f) {
  return "Finding(rule=" + std::string(py::repr(py::str(std::string(f.rule_id())))) +
         ", line=" + std::to_string(f.line) + ", column=" + std::to_string(f.column) +
         ", message=" + std::string(py::repr(py::str(f.message))) + ")";
}

}  // namespace

void BindSandbox(py::module_& m) {
  py::module_ sub = m.def_submodule("_sandbox", "the AST gate (use dolsot.sandbox)");

  py::class_<Finding>(sub, "Finding", "One reason the AST gate rejects a cell.")
      .def_property_readonly("rule", [](const Finding& f) { return std::string(f.rule_id()); },
                             "the rule id, e.g. 'name-denied'")
      .def_readonly("message", &Finding::message)
      .def_readonly("line", &Finding::line, "1-based line")
      .def_readonly("column", &Finding::column, "1-based column, in code points")
      .def_readonly("start_byte", &Finding::start_byte, "start of the span in the UTF-8 source")
      .def_readonly("end_byte", &Finding::end_byte, "end of the span (exclusive)")
      .def("__str__", [](const Finding& f) { return sandbox::FormatFinding(f); })
      .def("__repr__", &FindingRepr)
      .def("__eq__", [](const Finding& a, const py::object& other) -> py::object {
        if (!py::isinstance<Finding>(other)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        const Finding& b = other.cast<const Finding&>();
        return py::bool_(a.rule == b.rule && a.message == b.message && a.line == b.line &&
                         a.column == b.column && a.start_byte == b.start_byte &&
                         a.end_byte == b.end_byte);
      })
      .def("__hash__", [](const Finding& f) {
        return py::hash(py::make_tuple(std::string(f.rule_id()), f.message, f.line, f.column,
                                       f.start_byte, f.end_byte));
      });

  py::class_<Policy>(sub, "Policy",
                     "What cells may import and use. Immutable; None means the default.")
      .def(py::init(&MakePolicy), py::kw_only(), py::arg("allowed_modules") = py::none(),
           py::arg("denied_names") = py::tuple(), py::arg("allowed_dunders") = py::none(),
           py::arg("toolboxes") = py::none(), py::arg("max_source_bytes") = std::size_t{8u << 20},
           py::arg("max_findings") = std::size_t{50}, py::arg("private_in_plain_methods") = true)
      .def_property_readonly("allowed_modules", [](const Policy& p) { return FrozenSet(p.allowed_modules); })
      .def_property_readonly("denied_names", [](const Policy& p) { return FrozenSet(p.denied_names); })
      .def_property_readonly("allowed_dunders", [](const Policy& p) { return FrozenSet(p.allowed_dunders); })
      .def_property_readonly("toolbox_aliases", [](const Policy& p) { return FrozenSet(p.toolbox_aliases); })
      .def_readonly("max_source_bytes", &Policy::max_source_bytes)
      .def_readonly("max_findings", &Policy::max_findings)
      .def_readonly("private_in_plain_methods", &Policy::private_in_plain_methods)
      .def("__repr__", [](const Policy& p) {
        return "Policy(" + std::to_string(p.allowed_modules.size()) + " allowed modules, " +
               std::to_string(p.toolbox_aliases.size()) + " toolboxes, " +
               std::to_string(p.denied_names.size()) + " extra denied names, " +
               std::to_string(p.allowed_dunders.size()) + " allowed dunders)";
      });

  sub.def("check_ast", &CheckAst, py::arg("code"), py::arg("policy") = nullptr,
          "Findings for `code` (str or bytes) under `policy` (default: Policy()); an empty "
          "list means the cell is allowed. Releases the GIL while checking. The cell is "
          "checked alone: `self._x` in plain methods is refused (no session remembers its "
          "classes; a backend's gate=AstGate(...) does, docs/gate.md).");
  sub.def("rules", [] {
    py::list out;
    for (const sandbox::RuleInfo& info : sandbox::AllRules()) {
      out.append(py::make_tuple(std::string(info.id), std::string(info.summary)));
    }
    return out;
  }, "[(rule id, summary)] for every rule");
}

}  // namespace dolsot::bindings
