// InProcessSession for Python: the C++ backend over the running interpreter.
// dolsot/inprocess.py subclasses it (context manager, arun); run() is this
// C++ method itself, with no Python wrapper on the hot path.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "backend_inprocess/in_process_session.h"
#include "bindings/bindings.h"
#include "bindings/fast_method.h"

namespace py = pybind11;

namespace dolsot::bindings {
namespace {

std::unique_ptr<InProcessSession> Create(py::object inject, std::optional<double> timeout,
                                         std::optional<long long> max_output, py::object gate,
                                         std::optional<bool> typecheck,
                                         std::optional<std::string> ty_bin) {
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
  options.config.max_output = MaxOutputArgument(max_output);
  options.config.typecheck = typecheck;
  options.config.ty_bin = ty_bin;
  options.gate = GateFromPython(std::move(gate));
  return ValueOrThrow(InProcessSession::Create(std::move(options)));
}

// InProcessSession.run(session_id, code, *, timeout=None), bound by hand
// (fast_method.h). A lone surrogate in the code is passed through as invalid
// UTF-8, which RunCell reports as a failed Result rather than this call raising.
PyObject* Run(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return CallAsMethod([&] {
    RunArguments a;
    ParseRunArguments(args, nargs, kwnames, a);
    RunOptions options;
    options.timeout_seconds = a.timeout;
    auto& session = SelfAs<InProcessSession>(self);
    return py::cast(ValueOrThrow(session.Run(a.session_id, a.code, options)));
  });
}

PyMethodDef kRunMethod = {
    "run", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&Run)),
    METH_FASTCALL | METH_KEYWORDS,
    "run($self, /, session_id, code, *, timeout=None)\n--\n\n"
    "Runs one cell; returns a Result (raises only for a caller mistake)."};

}  // namespace

void BindInProcess(py::module_& m) {
  py::class_<InProcessSession> cls(m, "InProcessSession", py::dynamic_attr());
  AddFastMethod(cls, &kRunMethod);
  cls
      .def(py::init(&Create), py::arg("inject") = py::none(), py::kw_only(),
           py::arg("timeout") = py::none(), py::arg("max_output") = py::none(),
           py::arg("gate") = py::none(), py::arg("typecheck") = py::none(),
           py::arg("ty_bin") = py::none())
      .def(
          "namespace", Checked<InProcessSession>("namespace",
          [](InProcessSession& self, std::string_view session_id) {
            return py::reinterpret_steal<py::dict>(ValueOrThrow(self.Namespace(session_id)));
          }),
          py::arg("session_id"), "The session's live namespace dict itself.")
      .def("sessions", Checked<InProcessSession>("sessions", [](InProcessSession& self) {
             return ValueOrThrow(self.Sessions());
           }))
      .def(
          "reset", Checked<InProcessSession>("reset",
          [](InProcessSession& self, std::string_view target) {
            return ValueOrThrow(self.Reset(target));
          }),
          py::arg("session_id"))
      .def("close", Checked<InProcessSession>("close", [](InProcessSession& self) {
             ThrowIfError(self.Close());
           }))
      .def_property_readonly("leaked_threads",
                             Checked<InProcessSession>("leaked_threads", [](InProcessSession& self) {
                               return self.LeakedThreads();
                             }),
                             "cell threads that outlived their deadline and still run");
}

}  // namespace dolsot::bindings
