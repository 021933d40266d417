// Repl: the forked-worker backend. Session state lives in session processes
// forked from a worker (a fork server that imported the toolboxes once); a
// runaway or crashing cell is killed with SIGKILL of its process group and the
// session rolls back to its state before that cell; state is checkpointed to a
// SessionStore.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend_subprocess/checkpoint_mode.h"
#include "core/backend.h"
#include "core/cell_gate.h"
#include "core/config.h"
#include "core/session_store.h"
#include "sandbox/sandbox_policy.h"

namespace dolsot {

struct ReplOptions {
  // alias -> importable module name, imported once by the worker.
  std::map<std::string, std::string> toolboxes;
  // Settings (explicit > DOLSOT_* > default); resolved by Repl::Create.
  ConfigOverrides config;
  // The store; nullptr means a FileStore at the resolved cache_dir.
  std::shared_ptr<SessionStore> store;
  bool snapshots = true;  // rollback on timeout/crash
  // After a new session's cell, open the next new session ahead (its
  // keeper, runner and first snapshot, off the caller's path), so the next
  // new session's first cell costs a hand-over (spare_session.h). One extra
  // live session's processes; a one-cell CLI call turns it off.
  bool spare_session = true;
  CheckpointMode checkpoint = CheckpointMode::kAsync;
  int max_live_sessions = 16;
  // How to start the worker: argv of a program that runs the worker loop on
  // the inherited fd named by the DOLSOT_WORKER_FD environment variable.
  // Empty: DefaultWorkerCommand() (worker_process.h), which finds the
  // dolsot-worker of the installed prefix a host was built against.
  std::vector<std::string> worker_command;
  // Optional gates run in the host before a cell is sent to the worker, in
  // the pipeline's order: the AST gate, the type gate (from `config`), this.
  CellGate ast_gate;
  CellGate gate;
  // The worker's sys.path after the host's cwd (a Python host passes its own
  // sys.path); empty keeps the worker interpreter's default.
  std::vector<std::string> python_path;
  // The interpreter the type gate resolves toolbox imports against (a
  // Python host passes sys.executable); empty: ty's own discovery.
  std::string python_executable;
  // Where the type gate finds toolbox modules when python_path is empty (the
  // CLI passes its cwd and PYTHONPATH: what the worker's sys.path starts with).
  std::vector<std::string> typecheck_path;
  // Extra "NAME=value" environment entries for the worker process.
  std::vector<std::string> worker_environment;
  // The worker's working directory, which its sys.path starts with (a
  // server runs a caller's cells where that caller runs); empty: the
  // host's cwd when the Repl is created.
  std::string worker_directory;
  // The environment the worker starts from instead of the host's ("NAME=
  // value" entries; worker_environment is added to it). nullopt: the host's.
  std::optional<std::vector<std::string>> worker_base_environment;
  // Kernel-enforced walls around the worker and its sessions (docs/sandbox.md);
  // none when unset. The worker fails to start rather than run with fewer
  // layers than asked, unless the policy is best_effort.
  std::optional<SandboxPolicy> sandbox;
  // A checkpoint written under a Sandbox is restored only under walls at
  // least as strong (sandbox/sandbox_mark.h); true takes such a session
  // into this Repl all the same (its cells' code is trusted), and its
  // checkpoints from then on carry this Repl's walls.
  bool accept_weaker_walls = false;
};

// Thread safety: as Backend. Calls on different sessions run in parallel;
// calls on one session are served in arrival order.
class Repl final : public Backend {
 public:
  // Resolves the configuration, opens the store and validates toolbox specs
  // (kInvalidToolbox). The worker starts lazily on the first run.
  static StatusOr<std::unique_ptr<Repl>> Create(ReplOptions options);
  ~Repl() override;  // Close()

  // Hard timeout, crash survival, branch, durable; no live objects.
  const Capabilities& capabilities() const override;
  // A stop (options.should_stop or Interrupt) kills the cell's process group
  // and rolls the session back, as a timeout does.
  StatusOr<Result> Run(std::string_view session_id, std::string_view code,
                       const RunOptions& options) override;
  Status Interrupt(std::string_view session_id) override;
  StatusOr<std::vector<SessionInfo>> Sessions() override;
  StatusOr<int> Reset(std::string_view session_id_or_all) override;
  Status Close() override;

  // A new live session `new_id` holding a copy of `source_id`'s state
  // (restored from the store first when not live). `new_id` must be unused.
  Status Branch(std::string_view source_id, std::string_view new_id) override;

  // Session `session_id` leaves this Repl: once a cell running in it has
  // finished, its state is checkpointed to the store (in every checkpoint
  // mode) and its process ends; the next Run restores it. OK when it is not
  // live here. When the checkpoint cannot be saved the session stays live
  // and the error says so.
  Status Release(std::string_view session_id) override;
  // The ids of the sessions live in this Repl (sorted).
  std::vector<std::string> LiveSessions() override;

  // Starts the worker now (it imports the toolboxes) instead of at the first
  // run, within 60 s: kInvalidToolbox naming a toolbox that does not import,
  // as the first Run would return. OK when it runs already.
  Status StartWorker();

  // The live-session limit (options.max_live_sessions at first). Setting it
  // (kInvalidArgument below 1) takes effect when a session next becomes
  // live: a lower limit evicts the least recently used sessions then, not
  // at once. Safe while cells run.
  int MaxLiveSessions() const;
  Status SetMaxLiveSessions(int max_live_sessions);
  // How many live sessions eviction (over the limit) has ended so far, their
  // state checkpointed or, when no checkpoint could be taken, dropped.
  std::uint64_t Evictions() const;

  // Pid of the worker (fork server), or -1 before the first run.
  int WorkerPid() const;
  // Tests only: the session slots this Repl keeps (live sessions, and ids
  // with work still owed or calls in flight), and how many slots eviction
  // has looked at so far.
  std::size_t SlotCountForTesting() const;
  std::uint64_t EvictionScansForTesting() const;
  // Tests only: waits up to `seconds` for the new session opened ahead;
  // whether one is ready.
  bool AwaitSpareForTesting(double seconds);

  // The layers the worker runs under (starting it if needed); kInvalidArgument
  // when this Repl has no sandbox.
  StatusOr<SandboxReport> SandboxStatus() override;

  class Impl;

 private:
  explicit Repl(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dolsot
