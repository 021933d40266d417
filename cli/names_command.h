// The names command: `dolsot --names SID [--json]` prints the names session
// SID holds without running a cell in it: its cell counter, namespace,
// checkpoint and turn stay as they were, so an agent driving the session
// sees nothing of it (the Jupyter kernel's completion, docs/jupyter.md).
// Through the server: the names the session's last cell there left (live,
// unsaveable names included); otherwise, or when the server does not hold
// it, the names its checkpoint saved.
#pragma once

#include <optional>
#include <string>

#include "cli/command_context.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace dolsot::cli {

struct NamesArgs {
  std::optional<std::string> session;
};

CLI::Option* AddNamesOptions(CLI::App& app, NamesArgs& args);

// Prints one name a line (nothing for a session that holds none or does
// not exist), or with --json {"session", "names", "source"}, "source" one
// of "live", "checkpoint", "none". Exit 0; 2 for a bad session id; 1 when
// the checkpoint cannot be read.
int NamesCommand(const NamesArgs& args, const CommandContext& context);

std::string SourceName(SessionNames::Source source);

}  // namespace dolsot::cli
