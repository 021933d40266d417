// `dolsot --sandbox --check`: the layers a sandboxed worker gets here.
#include "cli/sandbox_check_command.h"

#include "core/backend.h"

namespace dolsot::cli {

int SandboxCheckCommand(const SandboxArgs& args, const CommandContext& context) {
  auto policy = SandboxPolicyFromArgs(args);
  if (!policy.ok()) return ReportSetupError(context.err, policy.status());
  BackendSettings settings;
  settings.sandbox = *policy;
  auto backend = context.open_backend(settings);
  if (!backend.ok()) return ReportSetupError(context.err, backend.status());
  auto report = (*backend)->SandboxStatus();
  (void)(*backend)->Close();
  if (!report.ok()) return ReportError(context.err, report.status());
  context.out << "dolsot sandbox: the worker runs under these layers\n" << report->ToText();
  context.out.flush();
  return 0;
}

}  // namespace dolsot::cli
