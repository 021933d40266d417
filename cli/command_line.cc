// Builds the one CLI11 parser from every command's options and parses argv.
#include "cli/command_line.h"

#include <CLI/CLI.hpp>
#include <optional>

#include "cli/did_you_mean.h"
#include "core/exit_codes.h"

#ifndef DOLSOT_VERSION
#define DOLSOT_VERSION "unknown"
#endif

namespace dolsot::cli {
namespace {

constexpr const char* kDescription =
    "dolsot: run a cell of Python in a session whose state (variables, imports,\n"
    "functions, DataFrames) persists between calls.";

constexpr const char* kFooter = R"FOOTER(Examples:
  dolsot --session work "x = 21"            # state persists per session id...
  dolsot --session work "x * 2"             # ...so this prints 42
  echo "2 ** 10" | dolsot --session work    # code on stdin
  dolsot --toolbox mytools:mt --session work "mt.add(1, 2)"
  dolsot --toolbox mytools:mt --toolbox otherlib:ol --session work "mt.add(1, ol.scale(2))"
  dolsot --session work --timeout 5 "slow_call()"
  dolsot --session work --json "1 + 1"      # the whole Result as one JSON object
  dolsot --list-sessions
  dolsot --reset work
  dolsot --reset all
  dolsot --names work                       # the names session work holds (runs nothing)
  dolsot mcp --toolbox mytools:mt           # an MCP server on stdio (dolsot mcp --help)
  dolsot kernel install --user --session work  # a Jupyter kernel on that session (docs/jupyter.md)

Output: stdout gets what the cell printed, then the value of its trailing
expression; stderr gets the error, and the "session now holds: ..." banner.

Exit codes: 0 ok; 1 the cell raised (or the worker failed); a toolbox
exception's own .exit_code; 124 the cell timed out; 130 Ctrl-C or SIGTERM
stopped it (the session rolls back after 124 and 130); 2 a usage error, bad
input or bad configuration (nothing ran, the session is untouched).

Environment: DOLSOT_CACHE_DIR (session directory), DOLSOT_SESSION_TTL_DAYS,
DOLSOT_TIMEOUT, DOLSOT_MAX_OUTPUT, DOLSOT_MAX_REPR, DOLSOT_MAX_TEXT,
DOLSOT_TYPECHECK, DOLSOT_TY_BIN, DOLSOT_SANDBOX (1: --sandbox), DOLSOT_SERVE (0: no
server), DOLSOT_SERVE_IDLE, DOLSOT_SERVE_PROFILES. Calls go through a per-user server (started on
demand) that keeps sessions live between calls: dolsot serve --status,
dolsot serve --stop. A --sandbox call runs there under its own policy (docs/cli.md).
Figures a cell shows or leaves open (matplotlib) are written as
dolsot-SID-N.png in the working directory; stderr names each one.
A code argument starting with '-' (or the word mcp or serve) goes after "--":
dolsot --session s -- "-1")FOOTER";

struct Parser {
  CLI::App app{kDescription, "dolsot"};
  CLI::Option* json = nullptr;
  std::vector<CLI::Option*> run;
  CLI::Option* list_sessions = nullptr;
  CLI::Option* reset = nullptr;
  CLI::Option* names = nullptr;
  CLI::App* mcp = nullptr;
  CLI::App* serve = nullptr;
  CLI::Option* no_serve = nullptr;
};

void Configure(Parser& parser, CommandLine& line) {
  CLI::App& app = parser.app;
  app.footer(kFooter);
  app.set_version_flag("-V,--version", VersionLine());
  parser.run = AddRunOptions(app, line.run);
  parser.list_sessions = AddListSessionsOptions(app, line.list_sessions);
  parser.reset = AddResetOptions(app, line.reset);
  parser.names = AddNamesOptions(app, line.names);
  parser.mcp = AddMcpCommand(app, line.mcp);
  parser.json = app.add_flag("--json", line.json,
                             "Print the Result (or the session list) as one JSON document");
  parser.no_serve = app.add_flag("--no-serve", line.no_serve,
                                 "Run directly, not through the server that keeps sessions live (as DOLSOT_SERVE=0)");
  // "dolsot serve ..." goes to ServeCommand before this parser (main.cc);
  // the word serve after a global flag ("dolsot --json serve --status")
  // lands here, so it is the subcommand there too, never a cell's code. Its
  // arguments are serve's own, collected as they are (prefix_command).
  parser.serve = app.add_subcommand("serve", "The server that keeps sessions live between calls: "
                                             "--status, --stop, --json (dolsot serve --help)");
  parser.serve->prefix_command();
  parser.serve->set_help_flag();  // serve's --help is ServeCommand's
}

// --list-sessions and --reset each stand alone (--json aside). Checked here
// rather than with CLI11's excludes() to keep --help readable.
std::optional<std::string> ConflictingOptions(const Parser& parser) {
  // mcp takes none of the global flags; serve takes --json (it has its own).
  for (const CLI::App* command : {parser.mcp, parser.serve}) {
    if (!command->parsed()) continue;
    std::vector<const CLI::Option*> top_level(parser.run.begin(), parser.run.end());
    top_level.insert(top_level.end(),
                     {parser.list_sessions, parser.reset, parser.names, parser.no_serve});
    if (command == parser.mcp) top_level.push_back(parser.json);
    for (const CLI::Option* option : top_level) {
      if (option->count() > 0) {
        const std::string word = command->get_name();
        const std::string name = option->get_name();
        return word + " cannot be combined with " + (name == "code" ? std::string("code to run") : name) +
               " (its options go after the word " + word + ")";
      }
    }
    return std::nullopt;
  }
  // --list-sessions, --reset and --names: at most one.
  std::string mode;
  for (const CLI::Option* option : {parser.list_sessions, parser.reset, parser.names}) {
    if (option->count() == 0) continue;
    if (!mode.empty()) return mode + " and " + option->get_name() + " cannot be combined";
    mode = option->get_name();
  }
  if (mode.empty()) return std::nullopt;
  for (const CLI::Option* option : parser.run) {
    if (option->count() > 0) {
      const std::string name = option->get_name();
      return mode + " cannot be combined with " + (name == "code" ? "code to run" : name);
    }
  }
  return std::nullopt;
}

int UsageError(std::ostream& err, const std::string& message) {
  err << "dolsot: error: " << message << "\n"
      << "Run 'dolsot --help' for usage and examples.\n";
  return kExitUsage;
}

// "--session=" with nothing after the '=': CLI11 would take the next word as
// the value (the code would then be read from stdin, and the call could hang
// on an open pipe). An option's value is never empty. "--" ends the options.
std::optional<std::string> EmptyOptionValue(int argc, const char* const* argv) {
  for (int i = 1; i < argc && argv[i] != nullptr; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() > 3 && arg.substr(0, 2) == "--" && arg.back() == '=') {
      return "option " + std::string(arg.substr(0, arg.size() - 1)) + " has an empty value";
    }
  }
  return std::nullopt;
}

// CLI11's message, and for a mistyped long option the nearest one
// (`--timout` -> "did you mean --timeout?").
std::string ParseErrorMessage(const Parser& parser, const CLI::ParseError& error, int argc,
                              const char* const* argv) {
  std::string message = error.what();
  std::vector<std::string> known;
  for (const CLI::App* app : {&parser.app, static_cast<const CLI::App*>(parser.mcp),
                              static_cast<const CLI::App*>(parser.serve)}) {
    if (app == nullptr) continue;
    for (const CLI::Option* option : app->get_options()) {
      for (const std::string& name : option->get_lnames()) known.push_back(name);
    }
  }
  std::vector<std::string_view> args;
  for (int i = 1; i < argc && argv[i] != nullptr; ++i) args.emplace_back(argv[i]);
  if (auto unknown = FirstUnknownLongOption(args, known)) {
    if (auto closest = ClosestName(*unknown, known)) {
      message += " (did you mean --" + *closest + "?)";
    }
  }
  return message;
}

Action ChooseAction(const Parser& parser, const CommandLine& line) {
  if (parser.mcp->parsed()) return Action::kMcp;
  if (parser.serve->parsed()) return Action::kServe;
  if (line.list_sessions.requested) return Action::kListSessions;
  if (line.reset.target) return Action::kReset;
  if (line.names.session) return Action::kNames;
  if (line.run.sandbox.check) return Action::kSandboxCheck;
  return Action::kRun;
}

CommandLine Parse(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CommandLine line;
  Parser parser;
  Configure(parser, line);
  if (auto empty = EmptyOptionValue(argc, argv)) {
    line.exit_code = UsageError(err, *empty);
    return line;
  }
  try {
    parser.app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << parser.app.help();
    line.exit_code = kExitOk;
    return line;
  } catch (const CLI::CallForVersion& version) {
    out << version.what() << '\n';
    line.exit_code = kExitOk;
    return line;
  } catch (const CLI::ParseError& error) {
    line.exit_code = UsageError(err, ParseErrorMessage(parser, error, argc, argv));
    return line;
  }
  if (auto conflict = ConflictingOptions(parser)) {
    line.exit_code = UsageError(err, *conflict);
    return line;
  }
  line.action = ChooseAction(parser, line);
  if (line.action == Action::kServe) {
    line.serve_args = {"serve"};
    if (line.json) line.serve_args.emplace_back("--json");
    for (std::string& arg : parser.serve->remaining()) line.serve_args.push_back(std::move(arg));
  }
  return line;
}

}  // namespace

std::string VersionLine() { return std::string("dolsot ") + DOLSOT_VERSION; }

CommandLine ParseCommandLine(int argc, const char* const* argv, std::ostream& out,
                             std::ostream& err) {
  return Parse(argc, argv, out, err);
}

CommandLine ParseCommandLine(const std::vector<std::string>& args, std::ostream& out,
                             std::ostream& err) {
  std::vector<const char*> argv{"dolsot"};
  for (const auto& arg : args) argv.push_back(arg.c_str());
  argv.push_back(nullptr);
  return Parse(static_cast<int>(args.size() + 1), argv.data(), out, err);
}

}  // namespace dolsot::cli
