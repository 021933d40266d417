// A worker profile of the dolsot server: what a Repl's workers are started
// with, so that a cell sees what it would see in direct mode. Two calls
// share a Repl exactly when their profiles are equal: the toolbox set,
// --gate, --max-repr and --max-text, the calling CLI's cwd, its whole
// environment (which holds PYTHONPATH and every DOLSOT_* setting) and the
// Sandbox policy it resolved (every field, canonical; none is a policy of
// its own). The timeout is not part of it: it is given per cell.
#pragma once

#include <string>
#include <vector>

#include "cli/command_context.h"
#include "core/config.h"

namespace dolsot::cli {

// The profile's key: equal for equal profiles (environment order ignored),
// different otherwise; not meant to be read.
std::string ProfileKey(const BackendSettings& settings, const std::string& cwd,
                       const std::vector<std::string>& env);

// Looks names up in `env` ("NAME=value" entries; the first one wins, as
// getenv does). The entries are copied.
EnvLookup LookupIn(const std::vector<std::string>& env);

}  // namespace dolsot::cli
