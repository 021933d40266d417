// Ctrl-C and SIGTERM: while a cell runs, they ask the backend to stop it (the
// Repl kills the cell, rolls the session back and returns exit code 130);
// at any other moment, or on a second signal, the CLI exits at once with
// 128 + the signal number, as a shell would.
#pragma once

namespace dolsot::cli {

// Installs the SIGINT / SIGTERM handlers. Call once, from main.
void InstallInterruptHandlers();

// True once SIGINT or SIGTERM arrived while a cell was running.
bool InterruptRequested();

// Marks the span in which a running cell may be stopped instead of the
// process exiting (one at a time; RAII).
class CellInProgress {
 public:
  CellInProgress();
  ~CellInProgress();
  CellInProgress(const CellInProgress&) = delete;
  CellInProgress& operator=(const CellInProgress&) = delete;
};

}  // namespace dolsot::cli
