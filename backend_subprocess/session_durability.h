// SessionDurability: one Repl session's durability policy. It decides when a
// cell's state must reach the session store (sync, async, deferred for binding
// cells, a journal frame or a delta frame instead of a whole checkpoint), does
// the saving, and keeps what a Result must report of it: the names the last
// checkpoint could not hold (Result::dropped) and saves that failed.
// docs/architecture.md, "How a cell flows", 5.
//
// The Repl owns one per session slot and keeps lifecycle, routing and
// eviction; a cell's run asks this object what RUN must say (BeginCell) and
// tells it what happened (EndCell). It never talks to a session process
// itself: a whole checkpoint taken in place comes through a TakeCheckpoint
// the caller passes, so it can be tested with a fake store and no worker.
//
// Thread safety. Most of it runs under the session slot's turn (the Repl's
// FifoMutex per session): Restored, set_sandbox_mark, BeginCell, a cell's
// channel handler, EndCell, SaveWhole, SaveBranched, CatchUpWithoutSerializing,
// SaveDue and SaveLastState. The rest may run without it, on other threads:
//   - SaveAsync, on the CheckpointSaver's thread, while a cell may run;
//   - Owes (the Repl's slot sweep) and NoteWarning (an eviction on another
//     session's behalf); TakeSaveError.
// So the fields a save sets (when the store last took a checkpoint, the last
// cell it holds, a whole checkpoint owed after a delta failed) are atomics;
// the dropped names, the rebinding cells and a pending save error sit behind
// one mutex; the SessionJournal and the gate memory lock themselves. The rest
// (the cell counter, the last changing cell, the deferred time, the sandbox
// mark) is the turn's. SaveAsync reads the mark without the turn: it is set
// only while the session is not live, and Run first lets a checkpoint still
// on its way land (Branch's restore of its source does not wait for one).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend_subprocess/checkpoint_journal.h"
#include "backend_subprocess/checkpoint_mode.h"
#include "backend_subprocess/checkpoint_saver.h"
#include "backend_subprocess/checkpoint_timer.h"
#include "backend_subprocess/live_session.h"
#include "core/gate_memory.h"
#include "core/session_store.h"

namespace dolsot {

// What the durability of every session of one Repl shares. The Repl owns it
// and everything it points to, which outlive every SessionDurability.
struct DurabilityContext {
  CheckpointMode mode = CheckpointMode::kAsync;
  // Config::checkpoint_delay_seconds: how long binding cells' changes (and a
  // delta the store could not take) wait for a checkpoint.
  std::int64_t delay_ns = 0;
  SessionStore* store = nullptr;
  CheckpointSaver* saver = nullptr;  // async checkpoints on their way
  CheckpointTimer* timer = nullptr;  // calls the Repl back when one is due
  // False once the store said it cannot append (SessionStore::Append).
  std::atomic<bool> store_appends{true};
};

class SessionDurability {
 public:
  // Has the session process serialize its state now, in place
  // (LiveSession::Checkpoint). Empty: the session has no process.
  using TakeCheckpoint = std::function<StatusOr<CheckpointData>()>;

  // `gate_memory` is the slot's, attached to every checkpoint saved; both it
  // and `context` outlive this object.
  SessionDurability(std::string session_id, DurabilityContext& context,
                    const SessionGateMemory& gate_memory);
  SessionDurability(const SessionDurability&) = delete;
  SessionDurability& operator=(const SessionDurability&) = delete;

  // --- The session made live (under the turn).
  // It was restored from `blob` (what the store gave back, split as `split`;
  // may be empty); `report` (may be null) gets the journal's damage.
  void Restored(std::string_view blob, const SplitCheckpoint& split, LoadReport* report);
  // What the first Result after a restore says of it: the names that could
  // not be restored, a checkpoint that could not be, a damaged journal.
  static void ReportRestore(const LoadReport& report, Result& result);
  // The Sandbox the session's state was made under (sandbox_mark.h,
  // encoded), attached to every checkpoint saved; nullopt: none.
  void set_sandbox_mark(std::optional<std::string> mark) { sandbox_mark_ = std::move(mark); }
  const std::optional<std::string>& sandbox_mark() const { return sandbox_mark_; }

  // --- A cell (under the turn).
  // Fills what RUN says of checkpoints (delta base, checkpoint owed) and
  // returns the cell's number (the session's cells started so far).
  std::uint64_t BeginCell(CellRun& run);
  // The handler of the async checkpoint channel that comes with cell
  // `cell`'s Result: hands it to the saver.
  LiveSession::ChannelHandler CellChannel(std::uint64_t cell);
  // What cell `cell` did: its bookkeeping, its checkpoint saved (sync), the
  // names no checkpoint holds and any earlier failed save added to
  // `outcome.result`. `take` is empty when the session process is gone.
  void EndCell(std::uint64_t cell, CellOutcome& outcome, const TakeCheckpoint& take);

  // --- Whole checkpoints the Repl takes (under the turn).
  // Saves `data`, a whole checkpoint of the state as it is now (eviction;
  // the journal's account of pending values is left as it was).
  Status SaveWhole(CheckpointData& data);
  // The same for a branch's first checkpoint, whose base holds every change
  // (the journal starts from it).
  Status SaveBranched(CheckpointData& data);
  // Before the session leaves: true when the store holds its state already
  // (its last checkpoint, once one on its way has landed), or a journal
  // frame made it so; false: a whole checkpoint is needed.
  bool CatchUpWithoutSerializing();
  // The timer's call, the session live: its deferred checkpoint, when
  // binding cells' changes (or a delta the store could not take) still wait.
  void SaveDue(const TakeCheckpoint& take);
  // Close: a checkpoint of the last state when the store does not hold it.
  void SaveLastState(const TakeCheckpoint& take);

  // --- From any thread.
  // The saver's call: checkpoint `data` of the state after `cell` arrived.
  void SaveAsync(CheckpointData data, std::uint64_t cell);
  // Whether forgetting the session's slot (not live) would lose something:
  // a checkpoint on its way, or a warning for its next Result.
  bool Owes();
  // Keeps `warning` for the next Result (an eviction on its behalf failed).
  void NoteWarning(const std::string& warning);
  // The failed saves not reported yet, cleared ("": none).
  std::string TakeSaveError();

 private:
  // The fields below, by the cell's outcome; then the checkpoint and the
  // names reports of EndCell.
  void NoteOutcome(std::uint64_t cell, CellOutcome& outcome);
  void SaveCellCheckpoint(std::uint64_t cell, CellOutcome& outcome, const TakeCheckpoint& take);
  void ReportDroppedSync(Result& result);
  void ReportDroppedAsync(std::uint64_t cell, const CellOutcome& outcome, Result& result);
  void ReportEarlierSaveError(Result& result);
  bool CheckpointOwed() const;
  std::shared_ptr<const BaseDigests> DeltaBase() const;
  // Saves a checkpoint the session wrote (the host's entries attached) as
  // the state after `cell`. A whole one becomes the store's base; a delta
  // is appended as a delta frame, or, when the store cannot take it, saves
  // nothing and sets *needs_whole (null: only a whole one is expected).
  Status SaveCheckpoint(CheckpointData& data, std::uint64_t cell, bool* needs_whole = nullptr);
  // A whole checkpoint taken now, saved, its verdict on names the latest.
  Status SaveNow(const TakeCheckpoint& take);
  // A journal frame when only binding cells changed the state since the
  // stored one, else SaveNow.
  Status SaveDeferred(const TakeCheckpoint& take);
  bool AppendFrame();  // true once appended; a failure is not retried
  void NoteStored(std::uint64_t cell);
  void NoteSaveError(const std::string& message);
  void ScheduleDue(std::chrono::nanoseconds extra = {});  // the timer, after the delay

  const std::string session_id_;
  DurabilityContext& context_;
  const SessionGateMemory& gate_memory_;
  std::optional<std::string> sandbox_mark_;  // turn

  std::uint64_t cells_started_ = 0;  // turn
  // The last cell that could have changed the state (any but a read-only
  // one, a killed one too: its rollback may have taken the checkpoint still
  // waiting in the runner with it), and the last whose checkpoint landed.
  // Saved behind changed, with no checkpoint on its way, means one was lost.
  std::uint64_t changed_cell_ = 0;  // turn
  std::atomic<std::uint64_t> saved_cell_{0};
  // When the store last took a checkpoint (or gave the one the session was
  // restored from), and when the last async one was handed to the saver,
  // steady-clock ns; 0: none, or the last save failed.
  std::atomic<std::int64_t> durable_at_ns_{0};
  std::atomic<std::int64_t> submitted_at_ns_{0};
  // Steady-clock ns of the first binding cell no checkpoint covers yet; 0:
  // none. Owed once the delay has passed: the next cell or the timer.
  std::int64_t deferred_since_ns_ = 0;  // turn
  // The cell whose delta checkpoint the store could not take (SaveAsync);
  // 0: none. Cleared once the store holds that state or a later one.
  std::atomic<std::uint64_t> whole_owed_after_{0};
  bool covered_ = false;  // turn: a checkpoint of the running cell is on its way
  SessionJournal journal_;

  std::mutex mutex_;  // guards the four below
  std::vector<std::string> last_dropped_;  // the latest checkpoint's verdict
  std::uint64_t last_dropped_cell_ = 0;    // the cell it followed
  // Async: the cell that last bound each name anew; a checkpoint written
  // before that says nothing of the name's new value.
  std::map<std::string, std::uint64_t> rebound_at_;
  std::string last_save_error_;  // a failed save not yet reported
};

}  // namespace dolsot
