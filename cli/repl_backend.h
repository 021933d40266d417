// Opens the Repl the dolsot command runs on (as a Backend, the only thing the
// commands see): synchronous checkpoints to the FileStore named by the
// configuration, the worker found beside the CLI.
#pragma once

#include <memory>

#include "backend_subprocess/repl.h"
#include "cli/command_context.h"
#include "core/config.h"

namespace dolsot::cli {

// The ReplOptions for `settings`, seen from the environment `env` (PYTHONPATH
// for the type gate): synchronous checkpoints, the worker beside the CLI,
// the AST gate when asked for. Snapshots off (the caller may turn them on).
StatusOr<ReplOptions> ReplOptionsFor(const BackendSettings& settings, const EnvLookup& env);

// Opens a Repl for `options`, as the Backend the commands and the server hold
// (its Release, LiveSessions and SandboxStatus are Backend's optional
// operations).
StatusOr<std::unique_ptr<Backend>> OpenRepl(ReplOptions options);

// A BackendFactory for main.cc.
StatusOr<std::unique_ptr<Backend>> OpenReplBackend(const BackendSettings& settings);

}  // namespace dolsot::cli
