// Toolbox hints and toolbox exit codes: reads a cell's exception for a
// toolbox's own exit code, or for a wrong-arguments call into a toolbox
// function (then names its signature and the toolbox's help()).
#include "embedded/toolbox_hints.h"

#include <Python.h>
#include <pybind11/pybind11.h>

#include <regex>

namespace py = pybind11;

namespace dolsot {
namespace {

// The qualified name CPython puts in front of an argument-binding TypeError,
// e.g. "add" in "add() missing 1 required positional argument: 'b'" (3.10+
// spell methods "Client.get()" and constructors "Client.__init__()").
std::optional<std::string> CalleeQualname(const std::string& message) {
  static const std::regex kCallError(
      R"(^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\(\) )"
      R"((missing \d+ required |takes |got an unexpected keyword argument|)"
      R"(got multiple values for|got some positional-only arguments))");
  std::smatch match;
  if (!std::regex_search(message, match, kCallError)) return std::nullopt;
  return match[1].str();
}

// The toolbox's public surface: __all__ when it is a list/tuple of str, else
// every attribute not starting with an underscore.
bool InPublicSurface(const py::handle& module, const std::string& name) {
  if (py::hasattr(module, "__all__")) {
    py::object all = module.attr("__all__");
    if (py::isinstance<py::list>(all) || py::isinstance<py::tuple>(all)) {
      for (py::handle item : all) {
        if (py::isinstance<py::str>(item) && item.cast<std::string>() == name) return true;
      }
      return false;
    }
  }
  return !name.empty() && name[0] != '_' && py::hasattr(module, name.c_str());
}

std::vector<std::string> SplitDots(const std::string& qualname) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t dot; (dot = qualname.find('.', start)) != std::string::npos; start = dot + 1) {
    parts.push_back(qualname.substr(start, dot - start));
  }
  parts.push_back(qualname.substr(start));
  return parts;
}

// The traceback's innermost frame ran in `globals`: the failing call was made
// by the cell (or a function it defined), not inside the toolbox. Without a
// traceback it cannot tell, and trusts the message.
bool RaisedByTheCell(const py::handle& exc, const py::handle& globals) {
  py::object tb = exc.attr("__traceback__");
  if (tb.is_none()) return true;
  while (!tb.attr("tb_next").is_none()) tb = tb.attr("tb_next");
  return tb.attr("tb_frame").attr("f_globals").ptr() == globals.ptr();
}

// "(a: int, b: int) -> int", or "(...)" when inspect cannot tell.
std::string SignatureText(const py::handle& callable) {
  try {
    std::string text = py::str(py::module_::import("inspect").attr("signature")(callable));
    for (std::size_t at; (at = text.find("typing.")) != std::string::npos;) text.erase(at, 7);
    return text;
  } catch (const py::error_already_set&) {
    return "(...)";
  }
}

struct Match {
  std::string alias;
  std::string display;  // "add", "Client.get"; a constructor shows its class
  std::string topic;    // the public name help() documents
  py::object callable;
};

// Resolves `qualname` in the toolbox bound to `alias`, or nullopt when it is
// not a public function (or class, or method of a public class) there.
std::optional<Match> FindInToolbox(const std::string& alias, const py::handle& module,
                                   const std::vector<std::string>& parts) {
  if (!InPublicSurface(module, parts.front())) return std::nullopt;
  py::object target = py::reinterpret_borrow<py::object>(module);
  std::string display;
  for (const auto& part : parts) {
    if (part == "__init__" && &part == &parts.back()) break;  // show the class
    if (!py::hasattr(target, part.c_str())) return std::nullopt;
    target = target.attr(part.c_str());
    display += (display.empty() ? "" : ".") + part;
  }
  if (!PyCallable_Check(target.ptr())) return std::nullopt;
  return Match{alias, display, parts.front(), target};
}

// The cell bound the callee's first name to something else callable: the
// message may be about the cell's own function, so no hint.
bool ShadowedByTheCell(const py::handle& globals, const Match& match, const py::handle& module) {
  py::dict names = py::reinterpret_borrow<py::dict>(globals);
  if (!names.contains(match.topic)) return false;
  py::object bound = names[match.topic.c_str()];
  return !bound.is(module.attr(match.topic.c_str())) && PyCallable_Check(bound.ptr());
}

std::string FormatHint(const Match& match, const py::handle& module) {
  std::string hint = "hint: " + match.alias + "." + match.display + SignatureText(match.callable);
  if (py::hasattr(module, "help") && PyCallable_Check(module.attr("help").ptr())) {
    hint += "; see " + match.alias + ".help(\"" + match.topic + "\")";
  }
  return hint;
}

std::optional<std::string> HintOrNull(PyObject* exc, PyObject* globals,
                                      const std::vector<std::string>& aliases) {
  if (!PyObject_TypeCheck(exc, reinterpret_cast<PyTypeObject*>(PyExc_TypeError))) {
    return std::nullopt;
  }
  if (!PyDict_Check(globals)) return std::nullopt;
  std::optional<std::string> qualname = CalleeQualname(py::str(py::handle(exc)));
  if (!qualname || !RaisedByTheCell(exc, globals)) return std::nullopt;
  std::vector<std::string> parts = SplitDots(*qualname);
  py::dict names = py::reinterpret_borrow<py::dict>(globals);
  for (const auto& alias : aliases) {
    if (!names.contains(alias)) continue;
    py::object module = names[alias.c_str()];
    if (!PyModule_Check(module.ptr())) continue;
    std::optional<Match> match = FindInToolbox(alias, module, parts);
    if (!match) continue;
    if (ShadowedByTheCell(globals, *match, module)) return std::nullopt;
    return FormatHint(*match, module);
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> ExceptionExitCode(PyObject* exc) {
  if (exc == nullptr) return std::nullopt;
  PyObject* code = PyObject_GetAttrString(exc, "exit_code");
  if (code == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  std::optional<int> out;
  if (PyLong_Check(code) && !PyBool_Check(code)) {
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(code, &overflow);
    if (!overflow && v >= 0 && v <= 255) out = static_cast<int>(v);
  }
  Py_DECREF(code);
  PyErr_Clear();
  return out;
}

std::optional<std::string> ToolboxCallHint(PyObject* exc, PyObject* globals,
                                           const std::vector<std::string>& aliases) {
  if (exc == nullptr || globals == nullptr) return std::nullopt;
  py::error_scope keep_pending_error;  // restores any error already set
  try {
    return HintOrNull(exc, globals, aliases);
  } catch (...) {  // a hint is best-effort: never raise into the cell runner
    PyErr_Clear();
    return std::nullopt;
  }
}

}  // namespace dolsot
