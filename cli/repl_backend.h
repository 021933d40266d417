// Opens the Repl the dolsot command runs on (as a Backend, the only thing the
// commands see): synchronous checkpoints to the FileStore named by the
// configuration, the worker found beside the CLI.
#pragma once

#include <memory>

#include "cli/command_context.h"

namespace dolsot::cli {

// A BackendFactory for main.cc.
StatusOr<std::unique_ptr<Backend>> OpenReplBackend(const BackendSettings& settings);

}  // namespace dolsot::cli
