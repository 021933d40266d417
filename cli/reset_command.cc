// The reset command: options and action.
#include "cli/reset_command.h"

#include <CLI/CLI.hpp>

#include "core/exit_codes.h"
#include "cli/json_writer.h"
#include "core/session_id.h"

namespace dolsot::cli {

std::string DescribeReset(const std::string& target, int removed) {
  if (target == kAllSessions) {
    return "removed " + std::to_string(removed) + (removed == 1 ? " session" : " sessions");
  }
  return removed > 0 ? "removed session " + target : "no session named " + target + " (nothing removed)";
}

CLI::Option* AddResetOptions(CLI::App& app, ResetArgs& args) {
  return app.add_option("--reset", args.target,
                        "Forget session SID, or every session with 'all', and exit")
      ->type_name("SID|all");
}

int ResetCommand(const ResetArgs& args, const CommandContext& context) {
  const std::string target = args.target.value_or("");
  if (Status valid = ValidateResetTarget(target); !valid.ok()) {
    return ReportError(context.err, valid);
  }
  auto backend = context.open_backend(BackendSettings{});
  if (!backend.ok()) return ReportSetupError(context.err, backend.status());
  auto removed = (*backend)->Reset(target);
  Status closed = (*backend)->Close();
  if (!removed.ok()) return ReportError(context.err, removed.status());
  if (context.json) {
    context.out << ResetToJson(target, *removed) << '\n';
  } else {
    context.out << DescribeReset(target, *removed) << '\n';
  }
  context.out.flush();
  if (!closed.ok()) context.err << "dolsot: warning: " << closed.message() << '\n';
  return kExitOk;
}

}  // namespace dolsot::cli
