// The dolsot command: parses the arguments and hands them to one command.
// Everything else lives in the command files (run_command, list_sessions_
// command, reset_command); CPython is never started in this process.
#include <unistd.h>

#include <iostream>

#include "cli/command_line.h"
#include "cli/interrupt.h"
#include "cli/repl_backend.h"
#include "cli/sandbox_check_command.h"

int main(int argc, char** argv) {
  using namespace dolsot::cli;
  std::ios::sync_with_stdio(false);
  InstallInterruptHandlers();
  CommandLine line = ParseCommandLine(argc, argv, std::cout, std::cerr);
  CommandContext context{std::cout, std::cerr, std::cin, ::isatty(STDIN_FILENO) == 1,
                         line.json, OpenReplBackend, UnixNow, InterruptRequested};
  switch (line.action) {
    case Action::kRun:
      return RunCommand(line.run, context);
    case Action::kListSessions:
      return ListSessionsCommand(line.list_sessions, context);
    case Action::kReset:
      return ResetCommand(line.reset, context);
    case Action::kSandboxCheck:
      return SandboxCheckCommand(line.run.sandbox, context);
    case Action::kExit:
      break;
  }
  std::cout.flush();
  return line.exit_code;
}
