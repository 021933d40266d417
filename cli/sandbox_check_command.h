// `dolsot --sandbox --check`: starts a sandboxed worker (a Repl) and prints
// the layers it runs under; exit 0, or the error naming a missing layer.
#pragma once

#include "cli/command_context.h"
#include "cli/sandbox_options.h"

namespace dolsot::cli {

int SandboxCheckCommand(const SandboxArgs& args, const CommandContext& context);

}  // namespace dolsot::cli
