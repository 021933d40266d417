// OpenReplBackend: BackendSettings -> ReplOptions -> Repl.
#include "cli/repl_backend.h"

#include "backend_subprocess/repl.h"
#include "cli/interrupt.h"
#include "cli/worker_locator.h"

#if __has_include("sandbox/ast_gate.h")
#include "sandbox/ast_gate.h"
#define DOLSOT_CLI_HAS_AST_GATE 1
#endif

#ifndef DOLSOT_BUILD_TREE_WORKER
#define DOLSOT_BUILD_TREE_WORKER ""
#endif

namespace dolsot::cli {
namespace {

Status AttachGate(ReplOptions& options) {
#ifdef DOLSOT_CLI_HAS_AST_GATE
  // Toolbox aliases are allowed imports and protected from rebinding.
  sandbox::Policy policy = sandbox::DefaultPolicy();
  for (const auto& [alias, module] : options.toolboxes) policy.AllowToolbox(alias, module);
  options.gate = MakeAstGate(std::move(policy));
  return Status::Ok();
#else
  (void)options;
  return InvalidArgument("--gate is not available: this dolsot was built without the AST gate");
#endif
}

// The Repl, with Ctrl-C / SIGTERM stopping a running cell (cli/interrupt.h).
class InterruptibleRepl final : public Backend {
 public:
  explicit InterruptibleRepl(std::unique_ptr<Repl> repl) : repl_(std::move(repl)) {}

  StatusOr<Result> Run(std::string_view session_id, std::string_view code,
                       const RunOptions& options) override {
    CellInProgress running;
    return repl_->Run(session_id, code, options, [] { return InterruptRequested(); });
  }
  StatusOr<std::vector<SessionInfo>> Sessions() override { return repl_->Sessions(); }
  StatusOr<int> Reset(std::string_view target) override { return repl_->Reset(target); }
  Status Close() override { return repl_->Close(); }

 private:
  std::unique_ptr<Repl> repl_;
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> OpenReplBackend(const BackendSettings& settings) {
  ReplOptions options;
  options.toolboxes = settings.toolboxes;
  options.config.timeout_seconds = settings.timeout_seconds;
  options.checkpoint = CheckpointMode::kSync;
  // The standby copy costs a fork per call, but a killed cell's Result then
  // says exactly what the session still holds.
  options.snapshots = true;
  if (settings.gate) DOLSOT_RETURN_IF_ERROR(AttachGate(options));
  if (auto worker = FindWorker(WorkerCandidates(CurrentExecutablePath(), DOLSOT_BUILD_TREE_WORKER))) {
    options.worker_command = {*worker};
  }
  auto repl = Repl::Create(std::move(options));
  if (!repl.ok()) return repl.status();
  return std::unique_ptr<Backend>(new InterruptibleRepl(std::move(*repl)));
}

}  // namespace dolsot::cli
