// The dolsot server (`dolsot serve`): one per cache directory and uid. It
// holds a Repl per worker profile (serve_profile.h) whose sessions stay live
// between CLI calls, runs the CLI's own commands on them over string
// streams (so the bytes are what direct mode prints), and serves one
// connection per thread on a unix socket (serve_protocol.h). A session is
// live in at most one Repl. Exits on `serve --stop`, SIGTERM or SIGINT, or
// after `idle_seconds` without a connection, closing (checkpointing) every
// Repl first.
#pragma once

#include "cli/serve_paths.h"
#include "cli/serve_settings.h"

namespace dolsot::cli {

struct ServerOptions {
  ServePaths paths;
  double idle_seconds = 600;  // DOLSOT_SERVE_IDLE
  // Profiles (each a Repl with its worker) kept at once: a call that needs
  // a new one beyond this retires the least recently used idle one.
  int max_profiles = 8;  // DOLSOT_SERVE_PROFILES
  // A pipe to write "ready\n" to once the socket listens (the client that
  // spawned the server waits on it), or -1 (foreground: the server takes
  // the start lock itself while it starts).
  int ready_fd = -1;
};

// Runs the server until it stops; the process's exit code. A server that
// cannot take the lock (another one runs) writes "busy\n" to ready_fd and
// returns 1 with a message on stderr.
int RunServer(const ServerOptions& options);

}  // namespace dolsot::cli
