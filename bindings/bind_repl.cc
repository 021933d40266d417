// Repl's constructor for Python (dolsot.repl.Repl builds on it; its methods
// are Backend's) and _run_worker, the entry point of `python -m dolsot._worker`.
#include <climits>

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "backend_subprocess/repl.h"
#include "backend_subprocess/worker_loop.h"
#include "bindings/bindings.h"
#include "bindings/fast_method.h"
#include "sandbox/bind_source.h"

namespace py = pybind11;

namespace dolsot::bindings {
namespace {

CheckpointMode ParseCheckpointMode(const std::optional<std::string>& mode) {
  if (!mode || *mode == "async") return CheckpointMode::kAsync;
  if (*mode == "sync") return CheckpointMode::kSync;
  if (*mode == "off") return CheckpointMode::kOff;
  ThrowStatus(InvalidArgument("checkpoint must be 'sync', 'async' or 'off', got '" + *mode + "'"));
}

// A dolsot.Sandbox (its _as_dict()) as the C++ policy.
std::optional<SandboxPolicy> SandboxFromPython(const py::object& sandbox) {
  if (sandbox.is_none()) return std::nullopt;
  if (!py::hasattr(sandbox, "_as_dict")) {
    ThrowStatus(InvalidArgument("sandbox must be a dolsot.Sandbox, got " +
                                std::string(py::str(py::type::of(sandbox).attr("__name__")))));
  }
  py::dict d = sandbox.attr("_as_dict")();
  SandboxPolicy policy;
  policy.network = d["network"].cast<bool>();
  policy.best_effort = d["best_effort"].cast<bool>();
  for (py::handle item : d["mounts"]) {
    auto [virt, host, mode] = item.cast<std::tuple<std::string, std::string, std::string>>();
    SandboxMount mount;
    mount.virtual_path = virt;
    mount.host_path = host;
    mount.mode = ValueOrThrow(ParseMountMode(mode));
    policy.mounts.push_back(std::move(mount));
  }
  policy.env = d["env"].cast<std::map<std::string, std::string>>();
  policy.memory_mb = d["memory_mb"].cast<std::uint64_t>();
  policy.processes = d["processes"].cast<std::uint64_t>();
  policy.open_files = d["open_files"].cast<std::uint64_t>();
  policy.file_size_mb = d["file_size_mb"].cast<std::uint64_t>();
  policy.disk_mb = d["disk_mb"].cast<std::uint64_t>();
  policy.cpu_seconds = d["cpu_seconds"].cast<std::uint64_t>();
  return policy;
}

std::unique_ptr<Repl> MakeRepl(std::map<std::string, std::string> toolboxes, py::object store,
                               std::optional<double> timeout, std::optional<long long> max_output,
                               bool snapshots, std::optional<std::string> checkpoint,
                               std::optional<double> checkpoint_delay,
                               std::optional<int> max_live_sessions, py::object gate,
                               std::optional<bool> typecheck, std::vector<std::string> python_path,
                               std::vector<std::string> worker_command,
                               std::vector<std::string> worker_environment,
                               std::string python_executable, std::optional<long long> max_repr,
                               std::optional<long long> max_text, py::object sandbox,
                               bool accept_weaker_walls) {
  ReplOptions options;
  options.sandbox = SandboxFromPython(sandbox);
  options.accept_weaker_walls = accept_weaker_walls;
  options.toolboxes = std::move(toolboxes);
  options.store = StoreFromPython(store);
  if (timeout) ThrowIfError(CheckTimeout(*timeout, "timeout"));
  options.config.timeout_seconds = timeout;
  options.config.max_output = CharactersArgument("max_output", max_output);
  options.config.max_repr = CharactersArgument("max_repr", max_repr);
  options.config.max_text = CharactersArgument("max_text", max_text);
  options.config.typecheck = typecheck;
  options.snapshots = snapshots;
  options.checkpoint = ParseCheckpointMode(checkpoint);
  if (checkpoint_delay) ThrowIfError(CheckCheckpointDelay(*checkpoint_delay, "checkpoint_delay"));
  options.config.checkpoint_delay_seconds = checkpoint_delay;
  if (max_live_sessions) options.max_live_sessions = *max_live_sessions;
  HostGates gates = GatesFromPython(gate);
  options.ast_gate = std::move(gates.ast_gate);
  options.gate = std::move(gates.caller_gate);
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

}  // namespace

void BindRepl(py::module_& m) {
  m.def(
      "_check_sandbox",
      [](const py::object& sandbox) {
        std::optional<SandboxPolicy> policy = SandboxFromPython(sandbox);
        if (policy) {
          ThrowIfError(ValidateSandboxPolicy(*policy));
          ThrowIfError(CheckMountSources(policy->mounts));
        }
      },
      py::arg("sandbox"),
      "Raises ConfigError naming the first thing wrong with a dolsot.Sandbox (the C++ "
      "policy's validation, as a Repl would at its start).");
  // Every method but the constructor is Backend's (bind_backend.cc).
  py::class_<Repl, Backend>(m, "Repl", "The forked-worker backend (use dolsot.Repl).")
      .def(py::init(&MakeRepl), py::arg("toolboxes"), py::kw_only(), py::arg("store") = py::none(),
           py::arg("timeout") = py::none(), py::arg("max_output") = py::none(),
           py::arg("snapshots") = true, py::arg("checkpoint") = py::none(),
           py::arg("checkpoint_delay") = py::none(),
           py::arg("max_live_sessions") = py::none(), py::arg("gate") = py::none(),
           py::arg("typecheck") = py::none(),
           py::arg("python_path") = std::vector<std::string>{},
           py::arg("worker_command") = std::vector<std::string>{},
           py::arg("worker_environment") = std::vector<std::string>{},
           py::arg("python_executable") = "", py::arg("max_repr") = py::none(),
           py::arg("max_text") = py::none(), py::arg("sandbox") = py::none(),
           py::arg("accept_weaker_walls") = false)
      .def(
          "_sandbox_layers",
          [](Repl& self) {
            StatusOr<SandboxReport> report = Status(ErrorCode::kInternal, "unset");
            {
              py::gil_scoped_release release;
              report = self.SandboxStatus();
            }
            std::vector<std::tuple<std::string, bool, std::string>> out;
            for (const SandboxLayer& l : ValueOrThrow(std::move(report)).layers) {
              out.emplace_back(l.name, l.active, l.detail);
            }
            return out;
          },
          "The sandbox's layers as (name, active, detail); starts the worker.")
      .def(
          "_await_spare_for_testing",
          [](Repl& self, double seconds) {
            py::gil_scoped_release release;
            return self.AwaitSpareForTesting(seconds);
          },
          py::arg("seconds"),
          "Tests only: waits up to `seconds` for the new session opened ahead; whether one is ready.")
      .def_property(
          "max_live_sessions",
          Checked<Repl>("max_live_sessions", [](Repl& r) { return r.MaxLiveSessions(); }),
          Checked<Repl>("max_live_sessions",
                        [](Repl& r, const py::object& value) {
                          // A bool is never taken for a number (as the constructor).
                          if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value)) {
                            throw py::type_error("max_live_sessions must be an int, got " +
                                                 std::string(py::str(py::type::of(value).attr("__name__"))));
                          }
                          const long long n = value.cast<long long>();
                          if (n < 1 || n > INT_MAX) {
                            ThrowStatus({ErrorCode::kInvalidArgument,
                                         "max_live_sessions must be from 1 to " +
                                             std::to_string(INT_MAX) + ", got " + std::to_string(n)});
                          }
                          ThrowIfError(r.SetMaxLiveSessions(static_cast<int>(n)));
                        }),
          "How many sessions stay live before the least recently used one is evicted "
          "(checkpointed and ended). Settable while cells run; a lower limit evicts when a "
          "session next becomes live.")
      .def_property_readonly(
          "evictions", Checked<Repl>("evictions", [](Repl& r) { return r.Evictions(); }),
          "How many live sessions were evicted (over max_live_sessions) so far.")
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
