// Repl: the forked-worker backend. Session state lives in session processes
// forked from a worker (a fork server that imported the toolboxes once); a
// runaway or crashing cell is killed with SIGKILL of its process group and the
// session rolls back to its state before that cell; state is checkpointed to a
// SessionStore.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/cell_gate.h"
#include "core/config.h"
#include "core/session_store.h"

namespace dolsot {

enum class CheckpointMode {
  kSync,   // the Result returns once the checkpoint is durable (the CLI)
  kAsync,  // a forked copy writes it while the next cell runs (library default)
  kOff,    // never checkpoint
};

struct ReplOptions {
  // alias -> importable module name, imported once by the worker.
  std::map<std::string, std::string> toolboxes;
  // Settings (explicit > DOLSOT_* > default); resolved by Repl::Create.
  ConfigOverrides config;
  // The store; nullptr means a FileStore at the resolved cache_dir.
  std::shared_ptr<SessionStore> store;
  bool snapshots = true;  // rollback on timeout/crash
  CheckpointMode checkpoint = CheckpointMode::kAsync;
  int max_live_sessions = 16;
  // How to start the worker: argv of a program that runs the worker loop on
  // the inherited fd named by the DOLSOT_WORKER_FD environment variable.
  // Empty: the dolsot-worker executable installed beside the library.
  std::vector<std::string> worker_command;
  // Optional gate run in the host before a cell is sent to the worker.
  CellGate gate;
};

class Repl final : public Backend {
 public:
  // Resolves the configuration, opens the store and validates toolbox specs
  // (kInvalidToolbox). The worker starts lazily on the first run.
  static StatusOr<std::unique_ptr<Repl>> Create(ReplOptions options);
  ~Repl() override;  // Close()

  StatusOr<Result> Run(std::string_view session_id, std::string_view code,
                       const RunOptions& options) override;
  StatusOr<std::vector<SessionInfo>> Sessions() override;
  StatusOr<int> Reset(std::string_view session_id_or_all) override;
  Status Close() override;

  // A new live session `new_id` holding a copy of `source_id`'s state.
  Status Branch(std::string_view source_id, std::string_view new_id);

  class Impl;

 private:
  explicit Repl(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dolsot
