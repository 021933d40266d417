// --sandbox and its options, and the --check command.
#include "cli/sandbox_options.h"

#include <CLI/CLI.hpp>

#include "sandbox/bind_source.h"

namespace dolsot::cli {

std::vector<CLI::Option*> AddSandboxOptions(CLI::App& app, SandboxArgs& args) {
  return {
      app.add_flag("--sandbox", args.sandbox,
                   "Run the cell inside kernel-enforced walls (docs/sandbox.md; also "
                   "DOLSOT_SANDBOX=1)"),
      app.add_option("--mount", args.mounts,
                     "Show host directory HOST at VIRT in the sandbox; MODE read-only "
                     "(default), read-write, or overlay (the cell writes to a layer of its "
                     "own; the host's directory is never written) (repeatable)")
          ->type_name("VIRT=HOST[:MODE]")
          ->allow_extra_args(false),
      app.add_flag("--network", args.network, "Let the sandboxed cell use the host's network"),
      app.add_option("--memory", args.memory_mb,
                     "Address space per sandboxed process, in MB (0: no cap; default 4096)")
          ->type_name("MB"),
      app.add_flag("--check", args.check,
                   "With --sandbox: print the layers the sandbox gets here and exit"),
      app.add_flag("--accept-weaker-walls", args.accept_weaker_walls,
                   "Restore a session checkpointed under a Sandbox even without that Sandbox "
                   "(its cells' code is trusted; docs/sandbox.md)"),
  };
}

StatusOr<std::optional<SandboxPolicy>> SandboxPolicyFromArgs(const SandboxArgs& args,
                                                             const EnvLookup& env) {
  if (args.resolved) {
    if (args.policy) DOLSOT_RETURN_IF_ERROR(ValidateSandboxPolicy(*args.policy));
    return args.policy;
  }
  const std::optional<std::string> value = env("DOLSOT_SANDBOX");
  bool from_env = false;
  if (value && !value->empty()) {
    StatusOr<bool> on = ParseFlag("DOLSOT_SANDBOX", *value);
    if (!on.ok()) return on.status();
    from_env = *on;
  }
  if (!args.sandbox && !from_env) {
    if (!args.mounts.empty() || args.network || args.memory_mb || args.check) {
      return InvalidArgument("--mount, --network, --memory and --check need --sandbox");
    }
    return std::optional<SandboxPolicy>();
  }
  SandboxPolicy policy;
  policy.network = args.network;
  if (args.memory_mb) policy.memory_mb = *args.memory_mb;
  for (const std::string& spec : args.mounts) {
    auto mount = ParseMountSpec(spec);
    if (!mount.ok()) return Status(mount.status().code(), "--mount: " + mount.status().message());
    policy.mounts.push_back(std::move(mount).value());
  }
  DOLSOT_RETURN_IF_ERROR(ValidateSandboxPolicy(policy));
  DOLSOT_RETURN_IF_ERROR(CheckMountSources(policy.mounts));
  return std::optional<SandboxPolicy>(std::move(policy));
}

}  // namespace dolsot::cli
