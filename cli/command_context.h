// CommandContext: what every command needs from its surroundings (streams,
// output mode, the clock, a way to open the backend), and the one place a
// Status becomes a `dolsot: error: ...` line and an exit code. main.cc fills
// it in from the process; tests pass string streams and a fake backend.
#pragma once

#include <fcntl.h>

#include <functional>
#include <istream>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend.h"
#include "core/status.h"
#include "sandbox/sandbox_policy.h"

namespace dolsot::cli {

// What a command asks of the backend it opens.
struct BackendSettings {
  std::map<std::string, std::string> toolboxes;  // alias -> module name
  std::optional<double> timeout_seconds;         // nullopt: DOLSOT_TIMEOUT / default
  bool gate = false;                             // run the AST gate before the cell
  std::optional<std::size_t> max_repr;           // nullopt: DOLSOT_MAX_REPR / default
  std::optional<std::size_t> max_text;           // nullopt: DOLSOT_MAX_TEXT / default
  // Per-cell rollback snapshots: for a long-lived server (dolsot mcp), whose
  // sessions stay live between cells. A one-cell call needs none.
  bool snapshots = false;
  // The Result returns once its checkpoint is durable (checkpoint mode
  // `sync`, what a one-cell call needs); false: written in the background
  // while the next cell runs, flushed when the backend closes (`async`).
  bool durable_each_cell = true;
  std::optional<SandboxPolicy> sandbox;           // --sandbox (cli/sandbox_options.h)
  bool accept_weaker_walls = false;               // --accept-weaker-walls (the same)
  // Start the worker (importing the toolboxes) when the backend opens, so a
  // toolbox that does not import is a setup error, not every cell's.
  bool start_worker = false;
};

using BackendFactory =
    std::function<StatusOr<std::unique_ptr<Backend>>(const BackendSettings& settings)>;

// The names a session holds, read without running anything in it
// (`dolsot --names`, cli/names_command.h), and where they were read.
struct SessionNames {
  enum class Source { kLive, kCheckpoint, kNone };
  Source source = Source::kNone;  // kNone: no such session (no names)
  std::vector<std::string> names;  // sorted
};
using NamesSource = std::function<StatusOr<SessionNames>(const std::string& session_id)>;

struct CommandContext {
  std::ostream& out;
  std::ostream& err;
  std::istream& in;
  bool stdin_is_terminal = false;
  bool json = false;  // --json: one JSON document on stdout
  BackendFactory open_backend;
  std::function<double()> now;  // Unix seconds
  // Polled while a cell runs: true stops it (Backend's StopCheck). main.cc
  // passes Ctrl-C / SIGTERM (cli/interrupt.h); tests may pass their own.
  StopCheck interrupted;
  // Where the figures a cell returns are written (cli/image_files.h).
  std::string image_directory = ".";
  // What image_directory is relative to (the server: the caller's cwd).
  int image_base_fd = AT_FDCWD;
  // Optional (issue #40): where a cell's stdout goes as it is written (not
  // with --json), and the max_output the backend caps the Result's stdout at
  // (cli/live_stdout.h prints live only what the Result surely starts with).
  std::function<void(std::string_view)> stream_out;
  std::size_t stream_max_output = 0;
  // Where --names reads a session's names: the server's live record, else
  // the store's checkpoint (main.cc, serve_server.cc).
  NamesSource session_names;
};

// The exit code for a failure found before or around a run: caller mistakes,
// bad input and bad configuration (including a refused cache directory) are
// kExitUsage; a timeout is kExitTimeout; anything else is kExitFailure.
int ExitCodeFor(const Status& status);

// Writes "dolsot: error: <message>" to `err` and returns ExitCodeFor(status).
int ReportError(std::ostream& err, const Status& status);

// For a failure to open the backend (bad configuration, a refused or
// unusable cache directory): nothing ran, so always kExitUsage.
int ReportSetupError(std::ostream& err, const Status& status);

// Seconds since the Unix epoch, from the system clock.
double UnixNow();

}  // namespace dolsot::cli
