// SandboxMark: the Sandbox a session ran under, as its checkpoint records it
// (a host-written entry, docs/checkpoint-format.md), and whether another
// Repl's Sandbox is as strong. A session's state was made by its cells: a
// checkpoint written under walls is loaded only under walls at least as
// strong, so a pickle that names os.system never runs outside them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "sandbox/sandbox_policy.h"

namespace dolsot {

// The mark of `policy`: every field but `env` (variables are not walls), in a
// length-prefixed text form that round-trips any path.
std::string EncodeSandboxMark(const SandboxPolicy& policy);
// kCorrupt naming what is malformed.
StatusOr<SandboxPolicy> DecodeSandboxMark(std::string_view mark);

// What `have` (nullopt: no Sandbox) lacks of `mark`, the walls a checkpoint
// was written under, one clause per difference ("" when `have` is at least
// as strong): no Sandbox; the network; best_effort; a cap that is higher or
// none; a mount the mark does not have at that path from that host path, or
// one in a freer mode (read-only < overlay < read-write).
std::string WeakerThanMark(const std::optional<SandboxPolicy>& have, const SandboxPolicy& mark);

// The mark a session's next checkpoints carry after a restore under `own`
// (this Repl's policy; nullopt without a Sandbox): the restored mark while
// `own` is at least as strong (the state still needs no more than that: a
// stricter Repl does not make it stricter to load), else `own`, the walls
// its cells run under from now on (the user took it across, trusting it).
std::optional<SandboxPolicy> CarriedMark(const std::optional<SandboxPolicy>& own,
                                         const std::optional<SandboxPolicy>& restored);

}  // namespace dolsot
