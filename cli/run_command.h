// The run command: `dolsot --session SID [--toolbox MODULE:ALIAS]...
// [--timeout S] [--gate] [CODE]` runs one cell and exits with its exit code.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/command_context.h"
#include "cli/sandbox_options.h"
#include "core/result.h"
#include "core/status.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace dolsot::cli {

// The flags that configure the backend, shared by the run command and
// `dolsot mcp`: --toolbox, --timeout, --gate, --max-repr, --max-text.
struct BackendArgs {
  std::vector<std::string> toolbox_specs;
  std::optional<double> timeout_seconds;
  bool gate = false;
  std::optional<long long> max_repr;  // --max-repr
  std::optional<long long> max_text;  // --max-text
  SandboxArgs sandbox;                // --sandbox, --mount, --network, --memory
};

struct RunArgs : BackendArgs {
  std::optional<std::string> session;
  // The code: `code` when set (tests), else the positional words joined
  // with spaces (as dolsot 0.4 does), else stdin.
  std::optional<std::string> code;
  std::vector<std::string> code_words;
  // --json-lines: the cell's stdout (and figures) as JSON lines while it
  // runs, then the --json document as the last line (cli/live_stdout.h).
  bool json_lines = false;
};

// Registers the run options on `app`; returns them so other commands can
// declare themselves incompatible with them.
std::vector<CLI::Option*> AddRunOptions(CLI::App& app, RunArgs& args);
// Registers the backend flags alone (a subcommand's), in the same order.
std::vector<CLI::Option*> AddBackendOptions(CLI::App& app, BackendArgs& args);
// The settings those flags ask for: the toolbox specs parsed, --timeout,
// --max-repr and --max-text checked; kInvalidArgument naming the flag.
StatusOr<BackendSettings> ResolveBackendArgs(const BackendArgs& args);

// "MODULE:ALIAS" -> {alias, module}. kInvalidArgument when the colon, the
// module or the alias is missing, or either is not a Python name.
StatusOr<std::pair<std::string, std::string>> ParseToolboxSpec(std::string_view spec);
// Every spec, as alias -> module; an alias given twice is an error.
StatusOr<std::map<std::string, std::string>> ParseToolboxSpecs(
    const std::vector<std::string>& specs);

// Why --session is required, for the usage error when it is missing.
std::string MissingSessionMessage();

// The first checks of a run (--session given, the backend flags) and its
// code (the argument, else stdin): what a client of the server does itself
// before it sends the code, with RunCommand's errors.
StatusOr<std::string> ReadRunCode(const RunArgs& args, const CommandContext& context);

// Checks the request, opens the backend, runs the cell, prints the Result
// and returns the exit code. Nothing reaches the session unless every check
// passes.
int RunCommand(const RunArgs& args, const CommandContext& context);

// The output contract: stdout gets the cell's stdout then the value; stderr
// the error, the dropped banner, the held banner, then a "figure: PATH" line
// per image file written. With --json, the whole Result as one JSON object
// on stdout, `image_paths` as its "images".
// `streamed`: what of the cell's stdout was printed while it ran
// (cli/live_stdout.h), which the Result's stdout starts with: only the rest
// of it is printed.
void PrintResult(const Result& result, const CommandContext& context,
                 const std::vector<std::string>& image_paths = {},
                 const std::string& streamed = {});

}  // namespace dolsot::cli
