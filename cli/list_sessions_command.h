// The list command: `dolsot --list-sessions [--json]` prints the stored
// sessions as an aligned table (or a JSON array), most recently used first.
#pragma once

#include <vector>

#include "cli/command_context.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace dolsot::cli {

struct ListSessionsArgs {
  bool requested = false;
};

CLI::Option* AddListSessionsOptions(CLI::App& app, ListSessionsArgs& args);

int ListSessionsCommand(const ListSessionsArgs& args, const CommandContext& context);

// The listing's order: most recently used first, then by id.
void SortMostRecentFirst(std::vector<SessionInfo>& sessions);

}  // namespace dolsot::cli
