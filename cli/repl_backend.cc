// OpenReplBackend: BackendSettings -> ReplOptions -> Repl.
#include "cli/repl_backend.h"

#include "backend_subprocess/repl.h"
#include "backend_subprocess/worker_process.h"
#include "cli/worker_locator.h"

#if __has_include("sandbox/ast_gate.h")
#include "sandbox/ast_gate.h"
#define DOLSOT_CLI_HAS_AST_GATE 1
#endif

#include <cstdlib>
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
  options.ast_gate = MakeAstGate(std::move(policy));
  return Status::Ok();
#else
  (void)options;
  return InvalidArgument("--gate is not available: this dolsot was built without the AST gate");
#endif
}

// Where the worker's sys.path starts: the cwd ("") and PYTHONPATH's entries.
// The type gate looks for toolbox modules there.
std::vector<std::string> TypecheckPath() {
  std::vector<std::string> path{""};
  if (const char* env = std::getenv("PYTHONPATH")) {
    std::istringstream entries(env);
    for (std::string entry; std::getline(entries, entry, ':');) {
      if (!entry.empty()) path.push_back(entry);
    }
  }
  return path;
}

}  // namespace

StatusOr<std::unique_ptr<Backend>> OpenReplBackend(const BackendSettings& settings) {
  ReplOptions options;
  options.toolboxes = settings.toolboxes;
  options.config.timeout_seconds = settings.timeout_seconds;
  options.config.max_repr = settings.max_repr;
  options.config.max_text = settings.max_text;
  options.checkpoint = CheckpointMode::kSync;
  // No snapshot (a fork per call): the one cell of a call runs in a
  // session just restored from the store, so a killed cell goes back to that
  // checkpoint, which is its state before the cell, and the Result still
  // says exactly what the session holds (LiveSession: restored, no cell yet).
  options.snapshots = false;
  options.sandbox = settings.sandbox;
  if (settings.gate) DOLSOT_RETURN_IF_ERROR(AttachGate(options));
  options.typecheck_path = TypecheckPath();
  if (auto worker = FindWorker(WorkerCandidates(CurrentExecutablePath(), DOLSOT_BUILD_TREE_WORKER))) {
    options.worker_command = {*worker};
    // The type gate resolves imports against the worker's own interpreter:
    // the console script's (a wheel), else the one the embedding worker takes.
    options.python_executable = ScriptInterpreter(*worker);
    if (options.python_executable.empty()) {
      options.python_executable = WorkerInterpreter(*worker, DOLSOT_BUILD_PYTHON_EXECUTABLE);
    }
  }
  auto repl = Repl::Create(std::move(options));
  if (!repl.ok()) return repl.status();
  return std::unique_ptr<Backend>(std::move(repl).value());
}

}  // namespace dolsot::cli
