// OpenReplBackend: BackendSettings -> ReplOptions -> Repl.
#include "cli/repl_backend.h"

#include "backend_subprocess/repl.h"
#include "backend_subprocess/worker_process.h"
#include "cli/worker_locator.h"

#if __has_include("sandbox/ast_gate.h")
#include "sandbox/ast_gate.h"
#include "sandbox/cpython_oracle_process.h"
#define DOLSOT_CLI_HAS_AST_GATE 1
#endif

#include <sstream>

#ifndef DOLSOT_BUILD_TREE_WORKER
#define DOLSOT_BUILD_TREE_WORKER ""
#endif
#ifndef DOLSOT_BUILD_PYTHON_EXECUTABLE
#define DOLSOT_BUILD_PYTHON_EXECUTABLE ""
#endif

namespace dolsot::cli {
namespace {

Status AttachGate(ReplOptions& options) {
#ifdef DOLSOT_CLI_HAS_AST_GATE
  // Toolbox aliases are allowed imports and protected from rebinding.
  sandbox::Policy policy = sandbox::DefaultPolicy();
  for (const auto& [alias, module] : options.toolboxes) policy.AllowToolbox(alias, module);
  // The CLI embeds no CPython: the interpreter the cells run on answers
  // where the cell's statements start (a `python -I -S` child), so a cell
  // tree-sitter reads differently from CPython is refused here too.
  policy.statement_oracle = sandbox::MakeCpythonProcessOracle(options.python_executable);
  options.ast_gate = MakeAstGate(std::move(policy));
  return Status::Ok();
#else
  (void)options;
  return InvalidArgument("--gate is not available: this dolsot was built without the AST gate");
#endif
}

// Where the worker's sys.path starts: the cwd ("") and PYTHONPATH's entries.
// The type gate looks for toolbox modules there.
std::vector<std::string> TypecheckPath(const EnvLookup& env) {
  std::vector<std::string> path{""};
  if (auto value = env("PYTHONPATH")) {
    std::istringstream entries(*value);
    for (std::string entry; std::getline(entries, entry, ':');) {
      if (!entry.empty()) path.push_back(entry);
    }
  }
  return path;
}

}  // namespace

StatusOr<ReplOptions> ReplOptionsFor(const BackendSettings& settings, const EnvLookup& env) {
  ReplOptions options;
  options.toolboxes = settings.toolboxes;
  options.config.timeout_seconds = settings.timeout_seconds;
  options.config.max_repr = settings.max_repr;
  options.config.max_text = settings.max_text;
  options.checkpoint = settings.durable_each_cell ? CheckpointMode::kSync : CheckpointMode::kAsync;
  // A one-cell call takes no snapshot (a fork per call): its cell runs in a
  // session just restored from the store, so a killed cell goes back to that
  // checkpoint, which is its state before the cell, and the Result still
  // says exactly what the session holds (LiveSession: restored, no cell yet).
  // A server's sessions stay live between cells: they need the snapshot.
  options.snapshots = settings.snapshots;
  options.spare_session = settings.snapshots;  // a one-cell call opens nothing ahead
  options.typecheck_path = TypecheckPath(env);
  options.sandbox = settings.sandbox;
  options.accept_weaker_walls = settings.accept_weaker_walls;
  if (auto worker = FindWorker(WorkerCandidates(CurrentExecutablePath(), DOLSOT_BUILD_TREE_WORKER))) {
    options.worker_command = {*worker};
    // The type gate resolves imports against the worker's own interpreter:
    // the console script's (a wheel), else the one the embedding worker takes.
    options.python_executable = ScriptInterpreter(*worker);
    if (options.python_executable.empty()) {
      options.python_executable = WorkerInterpreter(*worker, DOLSOT_BUILD_PYTHON_EXECUTABLE);
    }
  }
  // After the worker is found: the gate asks the worker's interpreter where
  // a cell's statements start (sandbox/cpython_oracle_process.h).
  if (settings.gate) DOLSOT_RETURN_IF_ERROR(AttachGate(options));
  return options;
}

StatusOr<std::unique_ptr<Backend>> OpenRepl(ReplOptions options) {
  auto repl = Repl::Create(std::move(options));
  if (!repl.ok()) return repl.status();
  return std::unique_ptr<Backend>(std::move(repl).value());
}

StatusOr<std::unique_ptr<Backend>> OpenReplBackend(const BackendSettings& settings) {
  auto options = ReplOptionsFor(settings, ProcessEnvironment());
  if (!options.ok()) return options.status();
  auto repl = Repl::Create(std::move(options).value());
  if (!repl.ok()) return repl.status();
  if (settings.start_worker) DOLSOT_RETURN_IF_ERROR((*repl)->StartWorker());
  return std::unique_ptr<Backend>(std::move(repl).value());
}

}  // namespace dolsot::cli
