// LiveSession: the host's handle on one live session's processes (the runner
// that holds the live state and runs every cell and, with rollback on, its
// snapshot: a forked copy holding the state from before the running cell).
// Runs a cell under a wall-clock deadline: on timeout it records the reason,
// SIGKILLs the runner's process group, and promotes the snapshot. Not
// thread-safe: the Repl serializes calls per session.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend_subprocess/latest_bindings.h"
#include "backend_subprocess/protocol.h"
#include "backend_subprocess/worker_process.h"
#include "backend_subprocess/worker_settings.h"
#include "core/cell_inputs.h"
#include "core/live_output_stream.h"
#include "core/result.h"

namespace dolsot {

// A serialized namespace as the session sent it.
struct CheckpointData {
  std::vector<std::string> saved;
  std::vector<std::string> dropped;
  std::string blob;
  // A delta checkpoint: `blob` holds the names that are not `delta_of`'s
  // values; `kept` (sorted) are (checkpoint_journal.h, delta frames).
  bool delta = false;
  CheckpointBase delta_of;
  std::vector<std::string> kept;
};

// Parses a kCheckpointData payload: the blob, then the saved and dropped
// names (PayloadWriter Strs), a byte saying whether it is a delta (then the
// base's size and fingerprint and the kept names), then the blob's size
// (u64). The blob keeps the payload's buffer (read from the end: nothing is
// copied).
StatusOr<CheckpointData> ParseCheckpointData(std::string payload);

struct CellRun {
  std::string_view code;  // the session names it "<cell N>" (its own counter)
  std::size_t max_output = 0;
  double timeout_seconds = 0;  // time left for the cell
  double nominal_timeout = 0;  // the timeout as configured (for messages)
  // Polled while waiting (about every 50 ms); returning true stops the cell
  // like a timeout, with exit code 130.
  std::function<bool()> should_stop;
  // Host tools the cell may call and variables bound before it runs (both
  // borrowed; empty when nullptr).
  const CellTools* tools = nullptr;
  std::string_view session_id;  // named in each ToolCall
  const std::vector<CellVariable>* variables = nullptr;
  // The host holds no durable checkpoint of the session's state: a
  // read-only cell is checkpointed all the same (protocol::kRunCheckpointOwed).
  bool checkpoint_owed = false;
  // The base the store holds, when the session's checkpoints may be deltas
  // against it (SessionJournal::DeltaBase); null: whole checkpoints. Sent
  // to the session when it does not hold these digests yet.
  std::shared_ptr<const BaseDigests> delta_base;
  // Optional (RunOptions::live): OUTPUT and IMAGE frames go there as they
  // come, and what came before a TOOL_CALL is delivered before the call is
  // dispatched. Borrowed.
  LiveOutputStream* live = nullptr;
};

struct CellOutcome {
  Result result;
  std::optional<CheckpointData> checkpoint;  // sync mode: to be saved
  bool session_lost = false;  // the state is gone (rollback off): restore next time
  bool interrupted = false;   // should_stop said so
  // Async checkpoints: the names the cell bound anew (their verdict is in
  // result.dropped; an older checkpoint's verdict on them is stale).
  std::vector<std::string> rebound;
  // The socket of a snapshot retired by now (rollback on): the caller closes
  // it, off the critical path (DeferredCloser).
  UniqueFd retired_socket;
  // The cell was proven read-only: no checkpoint follows it (the last one
  // still holds the state) and the snapshot from before it stays.
  bool read_only = false;
  // The runner died in this cell (killed, crashed): a checkpoint it still
  // held for an earlier cell (async coalescing) died with it.
  bool runner_died = false;
  // A binding cell (embedded/read_only_cell.h): it changed only the names it
  // bound and the plain containers they hold, whose values this LiveSession
  // keeps for the snapshot from before it, which stays; no checkpoint
  // follows it.
  bool binding = false;
  protocol::Bindings bindings;  // a binding cell's values (for the store's journal)
};

// What a restore brought back.
struct LoadReport {
  std::vector<std::string> restored;
  std::vector<std::string> failed;
  std::string error;  // the whole checkpoint was unusable
  // The host's finding: the journal after the checkpoint's base stopped
  // early (checkpoint_journal.h), so the changes from there on are lost.
  std::string journal_damage;
};

class LiveSession {
 public:
  using ChannelHandler = std::function<void(UniqueFd)>;

  // A freshly opened session process: restores `blob` (may be empty).
  // `worker` (may be null) says how a dead runner ended.
  static StatusOr<std::unique_ptr<LiveSession>> Start(ProcessChannel channel, std::string_view blob,
                                                      const WorkerSettings& settings,
                                                      protocol::Deadline deadline,
                                                      LoadReport* report,
                                                      std::weak_ptr<WorkerProcess> worker = {});
  // A process forked by Branch(): already holds its state.
  static std::unique_ptr<LiveSession> Adopt(ProcessChannel channel, const WorkerSettings& settings,
                                            std::weak_ptr<WorkerProcess> worker = {});
  ~LiveSession();  // Kill()

  // `on_checkpoint_channel` receives the async checkpoint channel that comes
  // with a Result.
  StatusOr<CellOutcome> Run(const CellRun& run, const ChannelHandler& on_checkpoint_channel);
  // Serializes the current state now (for eviction and branches).
  StatusOr<CheckpointData> Checkpoint(protocol::Deadline deadline,
                                      const ChannelHandler& on_checkpoint_channel);
  // A new process holding a copy of this state.
  StatusOr<ProcessChannel> Branch(protocol::Deadline deadline,
                                  const ChannelHandler& on_checkpoint_channel);
  // Reads the RUNNER frame a runner that started serving sends first (its
  // pid, its snapshot's socket), so it can be killed and rolled back.
  Status Settle(protocol::Deadline deadline, const ChannelHandler& on_checkpoint_channel);
  // SIGKILLs every process of this session. Idempotent.
  void Kill();

  // Whether Recycle() may make this session a new one: rollback on, its
  // runner settled with nothing unread from it, and its snapshot still the
  // one forked before the first cell of a new session (no cell since
  // replaced it: none took the general path, none was killed, the runner
  // never refreshed it), so that snapshot holds exactly a new session.
  bool Recyclable() const;
  // Opened ahead by the spare maker, so Recyclable() may say yes. A session
  // opened on demand may have been forked before the worker shared its
  // pages (a burst at the start), and its keeper and snapshot hold those
  // pages as they were for as long as they live: recycled, ~3.5 MB more
  // for every session after it (the spare maker waits for the sharing).
  void AllowRecycling() { recycling_allowed_ = true; }
  // Ends this session and makes a new one of its processes, as Monty hands
  // a pooled worker back (issue #39). Its runner's cells were all proven
  // (Recyclable), so it differs from the snapshot only in what they bound:
  // RENEW_IN_PLACE asks it to put its namespace back to the snapshot's and
  // serve a new session itself, with the same snapshot (no fork, no
  // answer: the next RUN goes out at once). When no cell was given the
  // host's tools; else, or when the runner cannot (Run then finds it gone
  // before it answered), the runner and its group are SIGKILLed and the
  // snapshot renewed: promoted with nothing to replay, it forks its own
  // snapshot (still one a new session holds: recyclable again), and its
  // RUNNER frame is read by Settle(), which Take calls. Host-side,
  // nothing of the session is kept (names, variables' digests, bindings,
  // threads). kUnavailable (the session killed) when the snapshot cannot be
  // renewed; kInvalidArgument when not Recyclable().
  Status Recycle();

  // The names the session held after its last cell.
  const std::vector<std::string>& held() const { return held_; }
  const std::weak_ptr<WorkerProcess>& worker() const { return worker_; }
  // Whether its runner is known to have exited (ProcessIdentity::Exited).
  bool RunnerExited() const { return runner_.process.Exited(); }
  // A pidfd on its runner that polls readable once it exits
  // (ProcessIdentity::Pin); empty when that cannot be had.
  UniqueFd PinRunner() const { return runner_.process.Pin(); }

 private:
  explicit LiveSession(const WorkerSettings& settings);
  // Sends RUN; *sent_variables gets the digests the session holds once the
  // cell completes (variables resent or kept).
  Status SendRun(const CellRun& run, std::map<std::string, std::string>* sent_variables);
  // A TOOL_CALL frame from the runner: hands it to the dispatcher, whose
  // reply goes out through `replies`, or answers at once when it cannot be
  // called.
  void DispatchToolCall(const CellRun& run, const protocol::Frame& frame,
                        const std::shared_ptr<class ToolReplies>& replies);
  // A TOOL_PIPES frame's descriptors: the cell's own tool pipes, checked
  // (tool_pipes.h) and handed to the tools' ToolPipesServer as a
  // ToolPipesHost with a new stop eventfd, whose other copy goes to `stop`,
  // to be written when the cell is over.
  void AcceptToolPipes(const CellRun& run, protocol::Frame& frame, UniqueFd* stop);
  StatusOr<CellOutcome> AwaitResult(const CellRun& run, protocol::Clock::time_point deadline,
                                    const ChannelHandler& on_channel);
  CellOutcome RunnerDied(const CellRun& run, bool timed_out, bool interrupted,
                         const std::string& output);
  // Hands the runner's role to the snapshot (PROMOTE after a death, RENEW
  // from Recycle): sends it `tag` with `payload`; its RUNNER frame is due.
  // The snapshot stays as it was when the frame cannot be written.
  Status PromoteSnapshot(protocol::Tag tag, std::string_view payload);
  // Recycle's second way: kills the runner and RENEWs the snapshot.
  Status RenewSnapshot();
  // After RENEW_IN_PLACE, the runner ended before it answered the RUN behind
  // it: notes it (renewal_refused_: Run renews the snapshot and sends the
  // RUN there) and says kUnavailable.
  Status RenewalRefused();
  // A RUNNER frame: the runner's pid (attested) and its snapshot's socket.
  Status AcceptRunner(protocol::Frame& frame);
  // SNAPSHOT_REFRESHED: the runner forked a new snapshot of its state
  // between cells (session_process.cc's RefreshWhenIdle) and retires the
  // old one; the new one holds what binding cells bound since.
  Status AdoptRefreshedSnapshot(protocol::Frame& frame);
  // On a runner's death: a SNAPSHOT_REFRESHED it sent before the killed
  // cell that the wait for that cell did not read.
  void AdoptRefreshedLeftUnread();
  // The next frame from the runner, its RUNNER frame taken first if due.
  StatusOr<protocol::Frame> ReadFromRunner(protocol::Deadline deadline);
  // Reads the runner's RUNNER frame if it is due, until `deadline`.
  void ReadPendingRunner(protocol::Clock::time_point deadline);

  bool snapshots_;
  bool sync_checkpoints_;  // binding cells come with rollback off too
  std::weak_ptr<WorkerProcess> worker_;
  ProcessChannel runner_;    // holds the live state, runs the cells
  ProcessChannel snapshot_;  // rollback on: the runner's copy from before its cell
  bool runner_frame_due_ = false;  // a RUNNER frame comes first on runner_.socket
  // Recyclable(): the snapshot holds a new session's state (Start from an
  // empty blob, or Recycle); cleared when any other snapshot replaces it.
  bool fresh_snapshot_ = false;
  // Recycle() promoted a fresh snapshot: its RUNNER frame's snapshot (forked
  // before any cell) is fresh too.
  bool recycling_ = false;
  bool recycling_allowed_ = false;  // AllowRecycling
  // Recycle() sent RENEW_IN_PLACE and the runner has not answered anything
  // since (it does not answer that frame; it ends when it cannot renew).
  bool renewing_in_place_ = false;
  bool renewal_refused_ = false;  // RenewalRefused, for Run
  bool tools_given_ = false;  // a cell was given the host's tools
  bool branched_ = false;     // Branch() forked a copy, which shares its keeper
  std::int64_t promoted_at_ns_ = 0;  // when the runner, a snapshot, was promoted
  // Rollback off, restored by Start() and no cell has run yet: the process
  // holds exactly the checkpoint it restored, so a killed first cell leaves
  // the session as before it (restored from that checkpoint next time) and
  // held_ stays right. The CLI relies on this to skip the snapshot fork.
  bool restored_no_cell_ = false;
  std::vector<std::string> held_;
  // held_ is what the runner sent in its last Result, so a read-only cell
  // may leave its names out (protocol::kRunHostHasNames). Not after a
  // restore (READY's list) or a rollback (the snapshot has not sent one).
  bool names_reported_ = false;
  // The base digests the runner holds (CellRun::delta_base), as RUN last
  // sent them (null: none), when delta_known_; a promoted snapshot or an
  // adopted branch holds whatever it forked with, so RUN says again.
  bool delta_known_ = true;
  std::shared_ptr<const BaseDigests> delta_told_;
  // The Python threads other than the main one alive after the last cell:
  // a rollback loses them, and the killed cell's Result says so.
  std::vector<std::string> threads_;
  // The variables the state after the last completed cell holds in its
  // private cache (name -> digest): what need not be sent again.
  std::map<std::string, std::string> variable_digests_;
  // Rollback on: what binding cells bound since the snapshot forked (name ->
  // marshalled value), replayed by the snapshot when it is promoted; the
  // session's cell count after the last of them; and their size. Past
  // kMaxPendingBindingBytes the next cell forks a new snapshot.
  static constexpr std::size_t kMaxPendingBindingBytes = 1 << 20;
  LatestBindings pending_bindings_;
};

}  // namespace dolsot
