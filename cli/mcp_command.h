// The mcp command: `dolsot mcp [--toolbox MODULE:ALIAS]... [--timeout S]
// [--gate] [--max-repr N] [--max-text N] [--checkpoint async|sync]
// [--sandbox [--mount VIRT=HOST[:MODE]]... [--network] [--memory MB]]` serves the Model Context Protocol
// over stdio (newline-delimited JSON-RPC) from one Repl, until stdin closes
// or SIGTERM / SIGINT arrives; then it stops the running cells, closes the
// Repl (every child reaped) and exits 0.
#pragma once

#include <string>

#include "cli/command_context.h"
#include "cli/run_command.h"

namespace CLI {
class App;
}  // namespace CLI

namespace dolsot::cli {

struct McpArgs {
  BackendArgs backend;  // the run command's backend flags
  // --checkpoint: "async" (the default: written while the next cell runs,
  // flushed at exit) or "sync" (on disk before the answer is written).
  std::string checkpoint = "async";
};

// Registers the `mcp` subcommand and its options on `app`.
CLI::App* AddMcpCommand(CLI::App& app, McpArgs& args);

// Serves MCP on the process's stdin and stdout. First it moves the
// transport to private close-on-exec copies of fds 0 and 1 and points fd 0
// at /dev/null and fd 1 at stderr, so nothing a cell or a child writes to
// fd 1 (or reads from fd 0) can reach the transport. A bad flag, a
// backend that cannot be opened, or (with --toolbox) a worker that cannot
// start or a toolbox that does not import, is reported on stderr with exit 2
// before anything is served.
int McpCommand(const McpArgs& args, const CommandContext& context);

}  // namespace dolsot::cli
