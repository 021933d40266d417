// Repl for Python (dolsot.repl.Repl builds on it) and _run_worker, the entry
// point of `python -m dolsot._worker`.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "backend_subprocess/repl.h"
#include "backend_subprocess/worker_loop.h"
#include "bindings/bindings.h"
#include "bindings/fast_method.h"

namespace py = pybind11;

namespace dolsot::bindings {
namespace {

CheckpointMode ParseCheckpointMode(const std::optional<std::string>& mode) {
  if (!mode || *mode == "async") return CheckpointMode::kAsync;
  if (*mode == "sync") return CheckpointMode::kSync;
  if (*mode == "off") return CheckpointMode::kOff;
  ThrowStatus(InvalidArgument("checkpoint must be 'sync', 'async' or 'off', got '" + *mode + "'"));
}

std::unique_ptr<Repl> MakeRepl(std::map<std::string, std::string> toolboxes, py::object store,
                               std::optional<double> timeout, std::optional<long long> max_output,
                               bool snapshots, std::optional<std::string> checkpoint,
                               std::optional<int> max_live_sessions, py::object gate,
                               std::optional<bool> typecheck, std::vector<std::string> python_path,
                               std::vector<std::string> worker_command,
                               std::vector<std::string> worker_environment,
                               std::string python_executable) {
  ReplOptions options;
  options.toolboxes = std::move(toolboxes);
  options.store = StoreFromPython(store);
  if (timeout) ThrowIfError(CheckTimeout(*timeout, "timeout"));
  options.config.timeout_seconds = timeout;
  options.config.max_output = MaxOutputArgument(max_output);
  options.config.typecheck = typecheck;
  options.snapshots = snapshots;
  options.checkpoint = ParseCheckpointMode(checkpoint);
  if (max_live_sessions) options.max_live_sessions = *max_live_sessions;
  options.gate = GateFromPython(gate);
  options.python_path = std::move(python_path);
  options.worker_command = std::move(worker_command);
  options.worker_environment = std::move(worker_environment);
  options.python_executable = std::move(python_executable);
  StatusOr<std::unique_ptr<Repl>> repl = Status(ErrorCode::kInternal, "unset");
  {
    py::gil_scoped_release release;
    repl = Repl::Create(std::move(options));
  }
  return ValueOrThrow(std::move(repl));
}

Result RunCell(Repl& repl, std::string_view sid, std::string_view code,
               std::optional<double> timeout) {
  if (timeout) ThrowIfError(CheckTimeout(*timeout, "timeout"));
  RunOptions options;
  options.timeout_seconds = timeout;
  bool interrupted = false;
  StatusOr<Result> result = Status(ErrorCode::kInternal, "unset");
  {
    py::gil_scoped_release release;
    // Ctrl-C while waiting: the check raises KeyboardInterrupt in this thread.
    StopCheck stop = [&interrupted] {
      py::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) interrupted = true;
      return interrupted;
    };
    result = repl.Run(sid, code, options, stop);
  }
  if (interrupted && PyErr_Occurred()) throw py::error_already_set();
  return ValueOrThrow(std::move(result));
}

// Repl.run(session_id, code, *, timeout=None), bound by hand (fast_method.h).
PyObject* Run(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return CallAsMethod([&] {
    RunArguments a;
    ParseRunArguments(args, nargs, kwnames, a);
    return py::cast(RunCell(SelfAs<Repl>(self), a.session_id, a.code, a.timeout));
  });
}

PyMethodDef kRunMethod = {
    "run", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&Run)),
    METH_FASTCALL | METH_KEYWORDS,
    "run($self, /, session_id, code, *, timeout=None)\n--\n\n"
    "Runs one cell in the session; returns its Result."};

}  // namespace

void BindRepl(py::module_& m) {
  py::class_<Repl> cls(m, "Repl", "The forked-worker backend (use dolsot.Repl).");
  AddFastMethod(cls, &kRunMethod);
  cls
      .def(py::init(&MakeRepl), py::arg("toolboxes"), py::kw_only(), py::arg("store") = py::none(),
           py::arg("timeout") = py::none(), py::arg("max_output") = py::none(),
           py::arg("snapshots") = true, py::arg("checkpoint") = py::none(),
           py::arg("max_live_sessions") = py::none(), py::arg("gate") = py::none(),
           py::arg("typecheck") = py::none(),
           py::arg("python_path") = std::vector<std::string>{},
           py::arg("worker_command") = std::vector<std::string>{},
           py::arg("worker_environment") = std::vector<std::string>{},
           py::arg("python_executable") = "")
      .def("sessions", Checked<Repl>("sessions",
           [](Repl& r) {
             StatusOr<std::vector<SessionInfo>> out = Status(ErrorCode::kInternal, "unset");
             {
               py::gil_scoped_release release;
               out = r.Sessions();
             }
             return ValueOrThrow(std::move(out));
           }))
      .def("reset", Checked<Repl>("reset",
           [](Repl& r, const std::string& target) {
             StatusOr<int> out = Status(ErrorCode::kInternal, "unset");
             {
               py::gil_scoped_release release;
               out = r.Reset(target);
             }
             return ValueOrThrow(std::move(out));
           }),
           py::arg("session_id"))
      .def("branch", Checked<Repl>("branch",
           [](Repl& r, const std::string& source, const std::string& target) {
             Status s;
             {
               py::gil_scoped_release release;
               s = r.Branch(source, target);
             }
             ThrowIfError(s);
           }),
           py::arg("source_id"), py::arg("new_id"))
      .def("close", Checked<Repl>("close",
           [](Repl& r) {
             Status s;
             {
               py::gil_scoped_release release;
               s = r.Close();
             }
             ThrowIfError(s);
           }))
      .def_property_readonly("worker_pid",
                             Checked<Repl>("worker_pid", [](Repl& r) { return r.WorkerPid(); }),
                             "The worker (fork server) process id, or -1 before the first run.");

  m.def(
      "_run_worker",
      [](int fd) {
        int rc = RunWorker(fd);
        // Only the worker itself gets here (sessions never return).
        return rc;
      },
      py::arg("fd"), "Runs the worker loop on `fd` (python -m dolsot._worker).");
}

}  // namespace dolsot::bindings
