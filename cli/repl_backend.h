// Opens the Repl the dolsot command runs on: synchronous checkpoints to the
// FileStore named by the configuration, the worker found beside the CLI,
// Ctrl-C / SIGTERM stopping a running cell.
#pragma once

#include <memory>

#include "cli/command_context.h"

namespace dolsot::cli {

// A BackendFactory for main.cc.
StatusOr<std::unique_ptr<Backend>> OpenReplBackend(const BackendSettings& settings);

}  // namespace dolsot::cli
