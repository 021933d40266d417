// Result, SessionInfo, configuration and session-id validation for Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "core/config.h"
#include "core/result.h"
#include "core/result_fields.h"
#include "core/session_id.h"
#include "core/session_info.h"
#include "core/toolbox_name.h"
#include "embedded/cell_tools.h"

namespace py = pybind11;

namespace dolsot::bindings {

namespace {

// Result's read-only attributes are core/result_fields.h's
// kResultPythonFields, named as the table names them; a field the table
// gains and this switch misses does not compile.
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
void DefineResultAttribute(py::class_<Result>& result, ResultField field) {
  const std::string name(ResultFieldName(field));
  switch (field) {
    case ResultField::kOk:
      result.def_readonly(name.c_str(), &Result::ok, "True if the cell ran without raising");
      return;
    case ResultField::kValue:
      result.def_readonly(name.c_str(), &Result::value,
                          "the trailing expression's bounded repr, or None");
      return;
    case ResultField::kStdout:
      result.def_readonly(name.c_str(), &Result::stdout_text, "what the cell printed");
      return;
    case ResultField::kError:
      result.def_readonly(name.c_str(), &Result::error,
                          "the error (a clean traceback), or None");
      return;
    case ResultField::kExitCode:
      result.def_readonly(name.c_str(), &Result::exit_code,
                          "0, a toolbox's own code, 1, 124 (timeout) or 130 (interrupted)");
      return;
    case ResultField::kOutcome:
      result.def_property_readonly(name.c_str(), &Result::outcome,
                                   "what happened to the cell (an Outcome), set once");
      return;
    case ResultField::kHeld:
      result.def_property_readonly(name.c_str(), [](const Result& r) { return r.held; },
                                   "names now in the session");
      return;
    case ResultField::kDropped:
      result.def_property_readonly(name.c_str(), [](const Result& r) { return r.dropped; },
                                   "names that could not be persisted");
      return;
    case ResultField::kErrorType:
      result.def_readonly(name.c_str(), &Result::error_type,
                          "the exception's type name when ok is False ('SyntaxError', "
                          "'ZeroDivisionError', 'TimeoutError', 'CellRejected', ...), else None");
      return;
    case ResultField::kReturned:
      result.def_property_readonly(
          name.c_str(),
          [](const Result& r) -> py::object {
            if (!r.returned || !r.returned->object || r.returned->object->object == nullptr) {
              return py::none();
            }
            return py::reinterpret_borrow<py::object>(r.returned->object->object);
          },
          "what the cell handed to the final-answer function (the object itself "
          "in-process, its unpickled copy from a Repl), or None");
      result.def_property_readonly("has_returned",
                                   [](const Result& r) { return r.returned.has_value(); },
                                   "True when the cell called the final-answer function");
      return;
    case ResultField::kSaveError:
      result.def_readonly(name.c_str(), &Result::save_error,
                          "why the session's state could not be saved (the store keeps an "
                          "older one), or None");
      return;
    case ResultField::kImages:
      result.def_property_readonly(
          name.c_str(),
          [](const Result& r) {
            py::list out;
            for (const std::string& png : r.images) out.append(py::bytes(png));
            return out;
          },
          "PNG bytes of the matplotlib figures the cell showed or left open, in order");
      return;
    case ResultField::kMaxText:
      result.def_readonly(name.c_str(), &Result::max_text,
                          "text's cap in characters (0: none), the backend's max_text");
      return;
    case ResultField::kText:
      result.def_property_readonly(
          name.c_str(), &Result::Text,
          "stdout + value + error + the banners, within max_text characters");
      return;
  }
}
#pragma GCC diagnostic pop

}  // namespace

void BindCore(py::module_& m) {
  py::enum_<Outcome>(m, "Outcome", "What happened to a cell (Result.outcome).")
      .value("OK", Outcome::kOk, "the cell ran and returned")
      .value("ERROR", Outcome::kError, "the cell raised")
      .value("TIMEOUT", Outcome::kTimeout, "the cell was stopped at its deadline (exit 124)")
      .value("INTERRUPTED", Outcome::kInterrupted,
             "the cell was stopped by interrupt() or Ctrl-C (exit 130)")
      .value("CRASHED", Outcome::kCrashed, "the cell's process died")
      .value("REJECTED", Outcome::kRejected, "a gate refused the cell; none of it ran")
      .value("WORKER_LOST", Outcome::kWorkerLost,
             "dolsot could not run the cell: its worker or session process is gone");

  py::class_<Result> result(m, "Result", "What one cell returns, identical for every backend.");
  result.def(py::init([](bool ok, std::optional<std::string> value, std::string stdout_text,
                       std::optional<std::string> error, int exit_code,
                       std::vector<std::string> held, std::vector<std::string> dropped,
                       std::optional<Outcome> outcome, std::optional<std::string> error_type,
                       std::optional<std::string> save_error, std::vector<py::bytes> images,
                       std::optional<long long> max_text) {
             Result r;
             if (outcome) r.SetOutcome(*outcome);
             r.error_type = std::move(error_type);
             if (!r.error_type && !ok) {
               if (const char* type = DefaultErrorType(outcome.value_or(Outcome::kError))) {
                 r.error_type = type;
               }
             }
             r.save_error = std::move(save_error);
             r.ok = ok;
             r.value = std::move(value);
             r.stdout_text = std::move(stdout_text);
             r.error = std::move(error);
             r.exit_code = exit_code;
             r.held = std::move(held);
             r.dropped = std::move(dropped);
             for (const py::bytes& png : images) r.images.push_back(std::string(png));
             if (max_text) r.max_text = *CharactersArgument("max_text", max_text);
             return r;
           }),
           py::kw_only(), py::arg("ok") = true, py::arg("value") = py::none(),
           py::arg("stdout") = "", py::arg("error") = py::none(), py::arg("exit_code") = 0,
           py::arg("held") = std::vector<std::string>{},
           py::arg("dropped") = std::vector<std::string>{}, py::arg("outcome") = py::none(),
           py::arg("error_type") = py::none(), py::arg("save_error") = py::none(),
           py::arg("images") = std::vector<py::bytes>{}, py::arg("max_text") = py::none());
  for (ResultField field : kResultPythonFields) DefineResultAttribute(result, field);
  py::list init_fields;
  for (ResultField field : kResultPythonInitFields) init_fields.append(ResultFieldName(field));
  py::list attributes;
  for (ResultField field : kResultPythonFields) attributes.append(ResultFieldName(field));
  // For tests/python/test_core.py: the table the class and its stub must agree with.
  m.attr("_RESULT_FIELDS") = py::dict(py::arg("attributes") = attributes,
                                      py::arg("init") = init_fields);
  result.def("__repr__", [](const Result& r) {
    py::object rep = py::module_::import("builtins").attr("repr");
    std::string out = "Result(ok=" + std::string(r.ok ? "True" : "False");
    out += ", value=" + py::str(rep(py::cast(r.value))).cast<std::string>();
    out += ", outcome=" + std::string(OutcomeName(r.outcome()));
    out += ", exit_code=" + std::to_string(r.exit_code);
    if (r.error) out += ", error=" + py::str(rep(py::cast(r.error))).cast<std::string>();
    return out + ")";
  });

  py::class_<SessionInfo>(m, "SessionInfo", "One stored session.")
      .def(py::init([](std::string id, std::uint64_t size_bytes, double last_used) {
             return SessionInfo{std::move(id), size_bytes, last_used};
           }),
           py::arg("id"), py::arg("size_bytes"), py::arg("last_used"))
      .def_readonly("id", &SessionInfo::id)
      .def_readonly("size_bytes", &SessionInfo::size_bytes)
      .def_readonly("last_used", &SessionInfo::last_used, "seconds since the epoch")
      .def("__repr__", [](const SessionInfo& s) {
        return "SessionInfo(id='" + s.id + "', size_bytes=" + std::to_string(s.size_bytes) +
               ", last_used=" + std::to_string(s.last_used) + ")";
      })
      .def("__eq__", [](const SessionInfo& a, const SessionInfo& b) {
        return a.id == b.id && a.size_bytes == b.size_bytes && a.last_used == b.last_used;
      });

  m.def("validate_toolbox",
        [](const std::string& alias, std::optional<std::string> module) {
          ThrowIfError(ValidateToolboxAlias(alias));
          if (module) ThrowIfError(ValidateToolboxModule(alias, *module));
        },
        py::arg("alias"), py::arg("module") = py::none(),
        "Raises InvalidToolbox unless `alias` (and `module`, if given) are what every "
        "backend and the CLI accept.");
  m.def("validate_session_id", [](const std::string& id) { ThrowIfError(ValidateSessionId(id)); },
        py::arg("session_id"), "Raises InvalidSession unless `session_id` is a valid id.");

  m.def("_parse_flag",
        [](const std::string& name, const std::string& raw) {
          if (raw.empty()) return false;  // unset or empty: off
          return ValueOrThrow(ParseFlag(name.c_str(), raw));
        },
        py::arg("name"), py::arg("raw"),
        "A DOLSOT_* flag's value as a bool (empty: False); ConfigError naming `name` for "
        "anything but 1/true/yes/on or 0/false/no/off.");

  m.def("resolve_config",
        [](std::optional<std::string> cache_dir, std::optional<int> ttl_days,
           std::optional<double> timeout, std::optional<long long> max_output,
           std::optional<bool> typecheck, std::optional<std::string> ty_bin,
           std::optional<long long> max_repr, std::optional<long long> max_text) {
          ConfigOverrides o;
          o.cache_dir = cache_dir;
          o.ttl_days = ttl_days;
          o.timeout_seconds = timeout;
          o.max_output = CharactersArgument("max_output", max_output);
          o.max_repr = CharactersArgument("max_repr", max_repr);
          o.max_text = CharactersArgument("max_text", max_text);
          o.typecheck = typecheck;
          o.ty_bin = ty_bin;
          Config c = ValueOrThrow(ResolveConfig(o));
          py::dict d;
          d["cache_dir"] = c.cache_dir;
          d["ttl_days"] = c.ttl_days;
          d["timeout"] = c.timeout_seconds;
          d["max_output"] = c.max_output;
          d["max_repr"] = c.max_repr;
          d["max_text"] = c.max_text;
          d["typecheck"] = c.typecheck;
          d["ty_bin"] = c.ty_bin;
          return d;
        },
        py::kw_only(), py::arg("cache_dir") = py::none(), py::arg("ttl_days") = py::none(),
        py::arg("timeout") = py::none(), py::arg("max_output") = py::none(),
        py::arg("typecheck") = py::none(), py::arg("ty_bin") = py::none(),
        py::arg("max_repr") = py::none(), py::arg("max_text") = py::none(),
        "Resolves every setting: explicit argument > DOLSOT_* variable > default.");
}

}  // namespace dolsot::bindings
