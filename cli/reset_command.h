// The reset command: `dolsot --reset SID|all [--json]` forgets one stored
// session, or every one, and says how many were removed.
#pragma once

#include <optional>
#include <string>

#include "cli/command_context.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace dolsot::cli {

struct ResetArgs {
  std::optional<std::string> target;  // a session id or "all"
};

CLI::Option* AddResetOptions(CLI::App& app, ResetArgs& args);

int ResetCommand(const ResetArgs& args, const CommandContext& context);

// "removed session s", "no session named s (nothing removed)", "removed 3 sessions".
std::string DescribeReset(const std::string& target, int removed);

}  // namespace dolsot::cli
