// The dolsot command: parses the arguments and hands them to one command,
// through the server (serve_client.h) unless DOLSOT_SERVE=0 / --no-serve.
// Everything else lives in the command files (run_command, list_sessions_
// command, reset_command, mcp_command, serve_command, kernel_command); CPython is never
// started in this process.
#include <unistd.h>

#include <iostream>
#include <string_view>
#include <vector>

#include "cli/command_line.h"
#include "cli/interrupt.h"
#include "cli/kernel_command.h"
#include "cli/repl_backend.h"
#include "cli/sandbox_check_command.h"
#include "cli/serve_client.h"
#include "cli/serve_command.h"
#include "cli/serve_settings.h"
#include "cli/stored_names.h"
#include "core/config.h"
#include "core/session_id.h"

int main(int argc, char** argv) {
  using namespace dolsot::cli;
  std::ios::sync_with_stdio(false);
  if (argc > 1 && std::string_view(argv[1]) == "serve") {
    return ServeCommand(argc - 1, argv + 1, std::cout, std::cerr);
  }
  if (argc > 1 && std::string_view(argv[1]) == "kernel") return KernelCommand(argc - 1, argv + 1, std::cerr);
  CommandLine line = ParseCommandLine(argc, argv, std::cout, std::cerr);
  if (line.action == Action::kServe) {  // after a global flag: dolsot --json serve --status
    std::vector<const char*> serve_argv;
    for (const std::string& arg : line.serve_args) serve_argv.push_back(arg.c_str());
    serve_argv.push_back(nullptr);
    return ServeCommand(static_cast<int>(line.serve_args.size()), serve_argv.data(), std::cout, std::cerr);
  }
  InstallInterruptHandlers();
  CommandContext context{std::cout, std::cerr, std::cin, ::isatty(STDIN_FILENO) == 1,
                         line.json || line.run.json_lines, OpenReplBackend, UnixNow,
                         InterruptRequested};
  context.session_names = StoredSessionNames;  // --names, when no server holds the session
  // Direct mode prints a cell's stdout as it comes (cli/live_stdout.h).
  if (auto config = dolsot::ResolveConfig(dolsot::ConfigOverrides{}); config.ok()) {
    context.stream_out = [](std::string_view text) {
      std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
      std::cout.flush();
    };
    context.stream_max_output = config->max_output;
  }
  // dolsot mcp holds its own Repl for its whole life, and --sandbox --check
  // looks at this machine: never through the server. A sandboxed run goes
  // through it like any other: its policy is part of the request and of the
  // worker profile (serve_profile.h).
  if (line.action != Action::kExit && line.action != Action::kMcp &&
      line.action != Action::kSandboxCheck) {
    dolsot::StatusOr<bool> serve = ServeEnabled(dolsot::ProcessEnvironment(), line.no_serve);
    if (!serve.ok()) return ReportError(context.err, serve.status());
    if (*serve) {
      if (auto code = CallServer(line, context)) return *code;
    } else if (line.action == Action::kRun && line.run.session &&
               dolsot::ValidateSessionId(*line.run.session).ok()) {
      ReleaseFromServer(*line.run.session, std::cerr);
    } else if (line.action == Action::kReset && line.reset.target &&
               dolsot::ValidateResetTarget(*line.reset.target).ok()) {
      ReleaseFromServer(*line.reset.target, std::cerr);
    }
  }
  switch (line.action) {
    case Action::kRun:
      return RunCommand(line.run, context);
    case Action::kListSessions:
      return ListSessionsCommand(line.list_sessions, context);
    case Action::kReset:
      return ResetCommand(line.reset, context);
    case Action::kNames:
      return NamesCommand(line.names, context);
    case Action::kMcp:
      return McpCommand(line.mcp, context);
    case Action::kSandboxCheck:
      return SandboxCheckCommand(line.run.sandbox, context);
    case Action::kServe:  // returned above
    case Action::kExit:
      break;
  }
  std::cout.flush();
  return line.exit_code;
}
