// The CLI's side of the dolsot server: connect (starting a server when none
// runs), send the parsed command, print the bytes it answers with. Also
// `serve --stop`, `serve --status`, and direct mode's release of a session a
// server holds live.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "cli/command_line.h"
#include "core/config.h"

namespace dolsot::cli {

// Runs `line` (kRun, kListSessions, kReset or kNames) through the server: the exit
// code, or nullopt when it has to run directly (a server could not be
// reached or started: one stderr line says so, or, when the configuration
// itself is bad, direct mode reports it exactly as always). A run starts a
// server when none runs; a list or a reset uses one only when it runs.
std::optional<int> CallServer(const CommandLine& line, const CommandContext& context);

// Direct mode: asks the server of this cache directory, when one runs, to
// let go of `target` (a session id or "all": checkpointed, process ended),
// so that mixing modes loses nothing. Silent when none runs.
void ReleaseFromServer(const std::string& target, std::ostream& err);

// `dolsot serve --stop`: stops this cache directory's server and waits
// until it is gone (0 also when none ran).
int StopServer(std::ostream& out, std::ostream& err, bool json);
// `dolsot serve --status`: pid, socket, uptime, live sessions.
int PrintServerStatus(std::ostream& out, std::ostream& err, bool json);

}  // namespace dolsot::cli
