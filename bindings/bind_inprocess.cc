// InProcessSession's constructor for Python: the C++ backend over the running
// interpreter. dolsot/inprocess.py subclasses it (context manager, arun); its
// methods, run() included, are Backend's (bind_backend.cc).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "backend_inprocess/cell_worker_pool.h"
#include "backend_inprocess/in_process_session.h"
#include "bindings/bindings.h"
#include "bindings/fast_method.h"

namespace py = pybind11;

namespace dolsot::bindings {
namespace {

std::unique_ptr<InProcessSession> Create(py::object inject, std::optional<double> timeout,
                                         std::optional<long long> max_output, py::object gate,
                                         std::optional<bool> typecheck,
                                         std::optional<std::string> ty_bin,
                                         std::optional<long long> max_repr,
                                         std::optional<long long> max_text) {
  InProcessOptions options;
  if (!inject.is_none()) {
    py::object mapping = py::module_::import("collections.abc").attr("Mapping");
    if (!py::isinstance(inject, mapping)) {
      ThrowStatus({ErrorCode::kInvalidToolbox,
                   "inject must map aliases to objects, got " +
                       py::str(py::type::of(inject).attr("__name__")).cast<std::string>()});
    }
    for (py::handle item : inject.attr("items")()) {
      py::tuple pair = py::reinterpret_borrow<py::tuple>(item);
      if (!py::isinstance<py::str>(pair[0])) {
        ThrowStatus({ErrorCode::kInvalidToolbox,
                     "inject alias " + py::str(py::repr(pair[0])).cast<std::string>() +
                         " is not a str"});
      }
      // `inject` keeps the objects alive until Create has taken its references.
      options.objects.emplace_back(pair[0].cast<std::string>(), pair[1].ptr());
    }
  }
  if (timeout) ThrowIfError(CheckTimeout(*timeout, "timeout"));
  options.config.timeout_seconds = timeout;
  options.config.max_output = CharactersArgument("max_output", max_output);
  options.config.max_repr = CharactersArgument("max_repr", max_repr);
  options.config.max_text = CharactersArgument("max_text", max_text);
  options.config.typecheck = typecheck;
  options.config.ty_bin = ty_bin;
  HostGates gates = GatesFromPython(std::move(gate));
  options.ast_gate = std::move(gates.ast_gate);
  options.gate = std::move(gates.caller_gate);
  return ValueOrThrow(InProcessSession::Create(std::move(options)));
}

}  // namespace

void BindInProcess(py::module_& m) {
  m.def(
      "_stop_cell_threads_before_exit",
      [](double seconds) {
        if (!(seconds >= 0 && seconds <= 3600)) {
          ThrowStatus({ErrorCode::kInvalidArgument, "seconds must be within [0, 3600]"});
        }
        return CellWorkerPool::StopTasksBeforeExit(
            std::chrono::milliseconds(static_cast<long long>(seconds * 1000)));
      },
      py::arg("seconds"),
      "for the exit hook (dolsot/inprocess.py): interrupts every in-process cell thread still "
      "running a cell or a release until none is or `seconds` passed; returns how many still are");
  // Every method but the constructor is Backend's (bind_backend.cc).
  py::class_<InProcessSession, Backend>(m, "InProcessSession", py::dynamic_attr())
      .def(py::init(&Create), py::arg("inject") = py::none(), py::kw_only(),
           py::arg("timeout") = py::none(), py::arg("max_output") = py::none(),
           py::arg("gate") = py::none(), py::arg("typecheck") = py::none(),
           py::arg("ty_bin") = py::none(), py::arg("max_repr") = py::none(),
           py::arg("max_text") = py::none())
      .def_property_readonly("leaked_threads",
                             Checked<InProcessSession>("leaked_threads", [](InProcessSession& self) {
                               return self.LeakedThreads();
                             }),
                             "cell threads that outlived their deadline and still run")
      .def_property_readonly("leaked_cells",
                             Checked<InProcessSession>("leaked_cells", [](InProcessSession& self) {
                               return self.LeakedCells();
                             }),
                             "{session_id: late cells still running}: cells past their deadline "
                             "that did not stop (listed after reset and close too, until they end)");
}

}  // namespace dolsot::bindings
