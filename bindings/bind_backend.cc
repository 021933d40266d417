// Backend for Python, bound once: every method a host calls (run, interrupt,
// sessions, reset, close, branch, namespace, capabilities) is bound here on
// the one interface; bind_repl.cc and bind_inprocess.cc add constructors only.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>

#include "bindings/bindings.h"
#include "bindings/cell_inputs_from_python.h"
#include "bindings/fast_method.h"
#include "bindings/output_callbacks_from_python.h"
#include "core/backend.h"
#include "core/config.h"

namespace py = pybind11;

namespace dolsot::bindings {
namespace {

// Signal handlers run only in the main thread; elsewhere there is no Ctrl-C
// to poll for. The main thread's ident is asked of `threading` at the first
// run (with the GIL), not when the module loads: a Repl's worker imports the
// module too and never needs it, and `threading` costs it ~3 ms to import.
std::atomic<unsigned long> main_thread_ident{0};

bool OnMainThread() {
  unsigned long main = main_thread_ident.load(std::memory_order_relaxed);
  if (main == 0) {
    main = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
    main_thread_ident.store(main, std::memory_order_relaxed);
  }
  return PyThread_get_thread_ident() == main;
}

// Runs the cell with the GIL released. On the main thread Ctrl-C stops the
// cell (Outcome::kInterrupted) and then raises KeyboardInterrupt here.
Result RunCell(Backend& backend, std::string_view sid, std::string_view code,
               std::optional<double> timeout, const PythonCellInputs& inputs,
               OutputCallbacks live) {
  if (timeout) ThrowIfError(CheckTimeout(*timeout, "timeout"));
  RunOptions options;
  options.timeout_seconds = timeout;
  inputs.Fill(options);
  options.live = std::move(live);
  bool interrupted = false;
  if (OnMainThread()) {
    options.should_stop = [&interrupted] {
      py::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) interrupted = true;
      return interrupted;
    };
  }
  StatusOr<Result> result = Status(ErrorCode::kInternal, "unset");
  {
    py::gil_scoped_release release;
    result = backend.Run(sid, code, options);
  }
  if (interrupted && PyErr_Occurred()) throw py::error_already_set();
  Result out = ValueOrThrow(std::move(result));
  inputs.DecodeReturned(out);
  return out;
}

// Backend.run(session_id, code, *, timeout=None, variables=None,
// on_output=None, on_image=None), bound by hand (fast_method.h).
// A lone surrogate in the code is passed through as invalid UTF-8, which the
// cell runner reports as a failed Result rather than this call raising.
PyObject* Run(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return CallAsMethod([&] {
    RunArguments a;
    ParseRunArguments(args, nargs, kwnames, a);
    Backend& backend = SelfAs<Backend>(self);
    PythonCellInputs inputs(self, a.session_id, a.variables, backend.capabilities().live_objects);
    return py::cast(RunCell(backend, a.session_id, a.code, a.timeout, inputs,
                            OutputCallbacksFromPython(a.on_output, a.on_image)));
  });
}

PyMethodDef kRunMethod = {
    "run", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&Run)),
    METH_FASTCALL | METH_KEYWORDS,
    "run($self, /, session_id, code, *, timeout=None, variables=None, on_output=None, "
    "on_image=None)\n--\n\n"
    "Runs one cell in the session; returns its Result (raises only for a caller mistake). "
    "`variables` (a dict) are bound in the session just before the cell runs. "
    "`on_output(text)` is called with the cell's stdout and stderr as it writes them, "
    "`on_image(png)` with each figure it shows, on a thread of dolsot's, all before run() "
    "returns; the Result is unchanged."};

// A session-id argument as a str: a TypeError naming the method, the argument
// and what it takes otherwise (not pybind11's list of overloads).
std::string SessionArgument(const char* method, const char* name, py::handle value) {
  if (!py::isinstance<py::str>(value)) {
    throw py::type_error(std::string(method) + "() argument '" + name +
                         "' must be a session id (str), got " +
                         std::string(Py_TYPE(value.ptr())->tp_name));
  }
  return value.cast<std::string>();
}

// Calls `method` with the GIL released; raises for a non-OK status.
template <typename F>
auto Released(F method) {
  using Returned = decltype(method());
  Returned out = Status(ErrorCode::kInternal, "unset");
  {
    py::gil_scoped_release release;
    out = method();
  }
  return out;
}

void BindCapabilities(py::module_& m) {
  py::class_<Capabilities>(m, "Capabilities", "What a backend can promise.")
      .def_readonly("hard_timeout", &Capabilities::hard_timeout,
                    "a runaway cell is killed at its deadline (else the timeout is cooperative)")
      .def_readonly("crash_survival", &Capabilities::crash_survival,
                    "a crashing cell costs neither the host nor the session")
      .def_readonly("live_objects", &Capabilities::live_objects,
                    "injected objects are shared by reference; namespace() works")
      .def_readonly("sandbox", &Capabilities::sandbox,
                    "cells run inside kernel-enforced walls")
      .def_readonly("tools", &Capabilities::tools, "cells can call host tools")
      .def_readonly("branch", &Capabilities::branch, "branch() works")
      .def_readonly("durable", &Capabilities::durable,
                    "sessions are checkpointed to a store and outlive the backend")
      .def("__repr__", [](const Capabilities& c) {
        auto flag = [](bool b) { return b ? std::string("True") : std::string("False"); };
        return "Capabilities(hard_timeout=" + flag(c.hard_timeout) +
               ", crash_survival=" + flag(c.crash_survival) + ", live_objects=" +
               flag(c.live_objects) + ", sandbox=" + flag(c.sandbox) + ", tools=" +
               flag(c.tools) + ", branch=" + flag(c.branch) + ", durable=" + flag(c.durable) + ")";
      });
}

}  // namespace

void BindBackend(py::module_& m) {
  BindCapabilities(m);
  py::class_<Backend> cls(m, "Backend", "The one interface of both backends (use dolsot.Repl "
                                         "or dolsot.InProcessSession).");
  AddFastMethod(cls, &kRunMethod);
  cls.def_property_readonly(
         "capabilities",
         Checked<Backend>("capabilities", [](Backend& b) { return b.capabilities(); }),
         "What this backend can promise (a Capabilities).")
      .def("interrupt", Checked<Backend>("interrupt",
           [](Backend& b, py::handle session_id) {
             std::string sid = SessionArgument("interrupt", "session_id", session_id);
             ThrowIfError(Released([&] { return b.Interrupt(sid); }));
           }),
           py::arg("session_id"),
           "Stops the cell running in the session now, if any: its run() returns "
           "outcome INTERRUPTED, exit code 130.")
      .def("sessions", Checked<Backend>("sessions",
           [](Backend& b) { return ValueOrThrow(Released([&] { return b.Sessions(); })); }))
      .def("reset", Checked<Backend>("reset",
           [](Backend& b, py::handle session_id) {
             std::string target = SessionArgument("reset", "session_id", session_id);
             return ValueOrThrow(Released([&] { return b.Reset(target); }));
           }),
           py::arg("session_id"))
      .def("branch", Checked<Backend>("branch",
           [](Backend& b, py::handle source_id, py::handle new_id) {
             std::string source = SessionArgument("branch", "source_id", source_id);
             std::string target = SessionArgument("branch", "new_id", new_id);
             ThrowIfError(Released([&] { return b.Branch(source, target); }));
           }),
           py::arg("source_id"), py::arg("new_id"))
      .def("namespace", Checked<Backend>("namespace",
           [](Backend& b, py::handle session_id) {
             std::string sid = SessionArgument("namespace", "session_id", session_id);
             return py::reinterpret_steal<py::object>(ValueOrThrow(b.Namespace(sid)));
           }),
           py::arg("session_id"), "The session's live namespace dict itself (live_objects only).")
      .def("close", Checked<Backend>("close",
           [](Backend& b) { ThrowIfError(Released([&] { return b.Close(); })); }));
}

}  // namespace dolsot::bindings
