// The run command: options, request checks, one cell, the output contract.
#include "cli/run_command.h"

#include "cli/live_stdout.h"

#include <CLI/CLI.hpp>

#include "cli/code_input.h"
#include "cli/interrupt.h"
#include "cli/json_writer.h"
#include "core/backend.h"
#include "core/config.h"
#include "core/toolbox_name.h"

namespace dolsot::cli {
namespace {

Status ToolboxError(std::string_view spec, const std::string& why) {
  return InvalidArgument("--toolbox '" + std::string(spec) + "': " + why +
                         " (expected MODULE:ALIAS, e.g. --toolbox mytools:mt)");
}

StatusOr<std::string> ObtainCode(const RunArgs& args, const CommandContext& context) {
  if (args.code) return *args.code;
  if (!args.code_words.empty()) {
    std::string code = args.code_words.front();
    for (std::size_t i = 1; i < args.code_words.size(); ++i) code += " " + args.code_words[i];
    return code;
  }
  if (context.stdin_is_terminal) {
    return InvalidArgument("no code to run: pass it as an argument or pipe it on stdin");
  }
  return ReadCode(context.in);
}

// Everything about the cell that can be refused before the backend is opened.
Status CheckRequest(const RunArgs& args, const std::string& code) {
  if (!args.session) return InvalidArgument(MissingSessionMessage());
  DOLSOT_RETURN_IF_ERROR(CheckCode(code));
  return ValidateRunRequest(*args.session, code);
}

void EndLine(std::ostream& stream, const std::string& text) {
  stream << text;
  if (!text.empty() && text.back() != '\n') stream << '\n';
}

}  // namespace

std::vector<CLI::Option*> AddRunOptions(CLI::App& app, RunArgs& args) {
  std::vector<CLI::Option*> sandbox = AddSandboxOptions(app, args.sandbox);
  std::vector<CLI::Option*> options{
      app.add_option("code", args.code_words,
                     "Python code to run (several words are joined with spaces); read from "
                     "stdin when omitted"),
      app.add_option("-s,--session", args.session,
                     "Session id whose state the cell reads and updates (required to run code)")
          ->type_name("SID"),
      app.add_flag("--json-lines", args.json_lines,
                   "As --json, and before the document the cell's output as it comes: one JSON "
                   "object per line ({\"stdout\": TEXT} or {\"image\": PATH}), the Result "
                   "last")};
  for (CLI::Option* option : AddBackendOptions(app, args)) options.push_back(option);
  options.insert(options.end(), sandbox.begin(), sandbox.end());
  return options;
}

std::vector<CLI::Option*> AddBackendOptions(CLI::App& app, BackendArgs& args) {
  return {
      app.add_option("--toolbox", args.toolbox_specs,
                     "Import MODULE into the session as ALIAS (repeatable)")
          ->type_name("MODULE:ALIAS")
          ->allow_extra_args(false),
      app.add_option("-t,--timeout", args.timeout_seconds,
                     "Seconds before the cell is killed (default: DOLSOT_TIMEOUT, else 20)")
          ->type_name("SECONDS"),
      app.add_flag("--gate", args.gate,
                   "Check the cell with the AST gate first; a rejected cell does not run"),
      app.add_option("--max-repr", args.max_repr,
                     "Characters of the value's repr kept, 0 for no cap (default: "
                     "DOLSOT_MAX_REPR, else 4000)")
          ->type_name("CHARS"),
      app.add_option("--max-text", args.max_text,
                     "Characters of the Result's text kept, 0 for no cap (default: "
                     "DOLSOT_MAX_TEXT, else 20000)")
          ->type_name("CHARS"),
  };
}

StatusOr<std::pair<std::string, std::string>> ParseToolboxSpec(std::string_view spec) {
  const std::size_t colon = spec.find(':');
  if (colon == std::string_view::npos) return ToolboxError(spec, "no ':' between module and alias");
  const std::string_view module = spec.substr(0, colon);
  const std::string_view alias = spec.substr(colon + 1);
  if (module.empty()) return ToolboxError(spec, "the module is empty");
  if (alias.empty()) return ToolboxError(spec, "the alias is empty");
  if (!ValidateToolboxModule(alias, module).ok()) {
    return ToolboxError(spec, "'" + std::string(module) + "' is not a module name");
  }
  if (Status valid = ValidateToolboxAlias(alias); !valid.ok()) {
    return ToolboxError(spec, "'" + std::string(alias) +
                                  "' is not a valid alias (an ASCII Python identifier, not a "
                                  "keyword, not starting with '__')");
  }
  return std::pair<std::string, std::string>(alias, module);
}

StatusOr<std::map<std::string, std::string>> ParseToolboxSpecs(
    const std::vector<std::string>& specs) {
  std::map<std::string, std::string> toolboxes;
  for (const auto& spec : specs) {
    auto parsed = ParseToolboxSpec(spec);
    if (!parsed.ok()) return parsed.status();
    auto [alias, module] = std::move(*parsed);
    if (toolboxes.count(alias)) {
      return ToolboxError(spec, "alias '" + alias + "' is already used by --toolbox " +
                                    toolboxes[alias] + ":" + alias);
    }
    toolboxes.emplace(std::move(alias), std::move(module));
  }
  return toolboxes;
}

StatusOr<BackendSettings> ResolveBackendArgs(const BackendArgs& args) {
  auto toolboxes = ParseToolboxSpecs(args.toolbox_specs);
  if (!toolboxes.ok()) return toolboxes.status();
  if (args.timeout_seconds) DOLSOT_RETURN_IF_ERROR(CheckTimeout(*args.timeout_seconds, "--timeout"));
  if (args.max_repr && *args.max_repr < 0) return InvalidArgument("--max-repr must be >= 0 (0: no cap)");
  if (args.max_text && *args.max_text < 0) return InvalidArgument("--max-text must be >= 0 (0: no cap)");
  BackendSettings settings{std::move(*toolboxes), args.timeout_seconds, args.gate};
  if (args.max_repr) settings.max_repr = static_cast<std::size_t>(*args.max_repr);
  if (args.max_text) settings.max_text = static_cast<std::size_t>(*args.max_text);
  auto sandbox = SandboxPolicyFromArgs(args.sandbox);
  if (!sandbox.ok()) return sandbox.status();
  settings.sandbox = *sandbox;
  settings.accept_weaker_walls = args.sandbox.accept_weaker_walls;
  return settings;
}

std::string MissingSessionMessage() {
  return "--session is required to run code.\n"
         "  State (variables, imports, DataFrames) persists per session id, so pass a\n"
         "  stable id per task and every cell of that task sees what the previous one\n"
         "  left behind, e.g.: dolsot --session task-42 \"x = 1\"";
}

StatusOr<std::string> ReadRunCode(const RunArgs& args, const CommandContext& context) {
  if (!args.session) return InvalidArgument(MissingSessionMessage());
  auto settings = ResolveBackendArgs(args);
  if (!settings.ok()) return settings.status();
  return ObtainCode(args, context);
}

int RunCommand(const RunArgs& args, const CommandContext& context) {
  auto code = ReadRunCode(args, context);
  if (!code.ok()) return ReportError(context.err, code.status());
  auto settings = ResolveBackendArgs(args);  // checked by ReadRunCode already
  if (!settings.ok()) return ReportError(context.err, settings.status());
  if (Status checked = CheckRequest(args, *code); !checked.ok()) {
    return ReportError(context.err, checked);
  }
  auto backend = context.open_backend(*settings);
  if (!backend.ok()) return ReportSetupError(context.err, backend.status());
  RunOptions options;
  options.should_stop = context.interrupted;
  // The cell's stdout as it comes (not with --json; as JSON lines with
  // --json-lines, figures too).
  LiveStdout live(context, args.json_lines, *args.session);
  options.live = live.Callbacks();
  StatusOr<Result> result = Status(ErrorCode::kInternal, "unset");
  {
    CellInProgress running;  // Ctrl-C / SIGTERM now stop the cell, not the process
    result = (*backend)->Run(*args.session, *code, options);
  }
  Status closed = (*backend)->Close();
  if (!result.ok()) return ReportError(context.err, result.status());
  auto image_paths = live.ImagePaths(result->images);
  PrintResult(*result, context, image_paths.ok() ? *image_paths : std::vector<std::string>{},
              live.printed());
  if (!image_paths.ok()) context.err << "dolsot: warning: " << image_paths.status().message() << '\n';
  if (!closed.ok()) context.err << "dolsot: warning: " << closed.message() << '\n';
  // The cell ran but the next call would not see what it did: a failure.
  if (result->ok && result->save_error) return kExitNotSaved;
  return result->exit_code;
}

void PrintResult(const Result& result, const CommandContext& context,
                 const std::vector<std::string>& image_paths, const std::string& streamed) {
  if (context.json) {
    context.out << ResultToJson(result, image_paths) << '\n';
    context.out.flush();
    return;
  }
  std::string_view rest = result.stdout_text;
  if (rest.substr(0, streamed.size()) == streamed) rest.remove_prefix(streamed.size());
  context.out << rest;
  if (result.value) {
    if (!result.stdout_text.empty() && result.stdout_text.back() != '\n') context.out << '\n';
    context.out << *result.value << '\n';
  }
  context.out.flush();
  if (result.error) EndLine(context.err, *result.error);
  EndLine(context.err, result.DroppedBanner());
  EndLine(context.err, result.HeldBanner());
  for (const std::string& path : image_paths) context.err << "figure: " << path << '\n';
  context.err.flush();
}

}  // namespace dolsot::cli
