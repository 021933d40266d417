// The Sandbox on the command line: --sandbox, --mount VIRT=HOST[:MODE],
// --network, --memory MB (DOLSOT_SANDBOX=1 turns it on), and
// `dolsot --sandbox --check`, which prints the layers the worker gets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/command_context.h"
#include "core/config.h"
#include "sandbox/sandbox_policy.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace dolsot::cli {

struct SandboxArgs {
  bool sandbox = false;
  std::vector<std::string> mounts;       // VIRT=HOST[:MODE]
  bool network = false;
  std::optional<std::uint64_t> memory_mb;
  bool check = false;
  // --accept-weaker-walls: restore a session checkpointed under a Sandbox
  // under weaker walls (or none) all the same (sandbox/sandbox_mark.h).
  // Not a wall itself, so it needs no --sandbox.
  bool accept_weaker_walls = false;
  // Set by the dolsot server from a request: the policy the calling CLI
  // resolved from its own flags and environment (nullopt: no sandbox). The
  // flags above and the server's own environment are then not read.
  bool resolved = false;
  std::optional<SandboxPolicy> policy;
};

// Registers the sandbox options on `app`; returns them.
std::vector<CLI::Option*> AddSandboxOptions(CLI::App& app, SandboxArgs& args);

// The policy the arguments ask for: none without --sandbox (or
// DOLSOT_SANDBOX=1 in `env`); --mount/--network/--memory without it is an
// error. A resolved policy (args.resolved) is validated and returned as is.
StatusOr<std::optional<SandboxPolicy>> SandboxPolicyFromArgs(
    const SandboxArgs& args, const EnvLookup& env = ProcessEnvironment());

}  // namespace dolsot::cli
