// CommandLine: the dolsot command's arguments, parsed with CLI11 into which
// command to run and its arguments. Each command registers its own options
// (run_command, list_sessions_command, reset_command); this file only puts
// them on one parser, adds --json / --help / --version, and says which
// combinations are exclusive.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "cli/list_sessions_command.h"
#include "cli/mcp_command.h"
#include "cli/names_command.h"
#include "cli/reset_command.h"
#include "cli/run_command.h"

namespace dolsot::cli {

enum class Action {
  kRun,           // run one cell
  kListSessions,  // --list-sessions
  kReset,         // --reset SID|all
  kNames,         // --names SID
  kMcp,           // the mcp subcommand
  kServe,         // the serve subcommand after a global flag: dolsot --json serve --status
  kSandboxCheck,  // --sandbox --check
  kExit,          // --help, --version or a usage error: already printed
};

struct CommandLine {
  Action action = Action::kExit;
  int exit_code = 0;  // for kExit
  bool json = false;
  bool no_serve = false;  // --no-serve: run directly, not through the server
  RunArgs run;
  ListSessionsArgs list_sessions;
  ResetArgs reset;
  NamesArgs names;
  McpArgs mcp;
  // kServe: the serve command's argv ("serve", then its own arguments; a
  // --json given before the word serve is passed on as serve's --json).
  std::vector<std::string> serve_args;
};

// Parses argv (argv[0] is the program). --help and --version print to `out`
// (exit 0); a usage error prints "dolsot: error: ..." to `err` (exit 2).
CommandLine ParseCommandLine(int argc, const char* const* argv, std::ostream& out,
                             std::ostream& err);
// The same for a list of arguments without the program name (tests).
CommandLine ParseCommandLine(const std::vector<std::string>& args, std::ostream& out,
                             std::ostream& err);

// "dolsot <version>".
std::string VersionLine();

}  // namespace dolsot::cli
