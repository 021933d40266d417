// SessionDurability: when a session's state reaches the store, and what a
// Result says of it (session_durability.h).
#include "backend_subprocess/session_durability.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <string_view>
#include <unordered_set>

#include "backend_subprocess/checkpoint_metadata.h"

namespace dolsot {
namespace {

// A read-only cell changes nothing, so the last checkpoint (saved, or on
// its way: an async one handed to the saver) still holds the state, unless
// there is none, the last save failed, or it is older than this: then the
// cell is checkpointed anyway. That also bounds how long a checkpoint that
// was lost without a word (its writer died) goes unnoticed, and keeps the
// store's last-used time (and a TTL) within this of the session's use.
constexpr std::chrono::seconds kReadOnlyCheckpointAge{30};

std::int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void AppendWarning(Result& r, const std::string& warning) {
  if (r.error && !r.error->empty()) {
    *r.error += "\n" + warning;
  } else {
    r.error = warning;
  }
}

// A save's failure on a Result: a warning, and its save_error.
void ReportSaveFailure(Result& result, const Status& saved) {
  AppendWarning(result, "warning: checkpoint not saved: " + saved.message());
  result.save_error = saved.message();
}

// Whether the session holds a name, by the names a Result lists: a hash set
// of views into them, made on the first question only (a read-only cell
// with no unsaveable names asks none, so its bookkeeping does not grow with
// the session's names: a std::set of copies cost ~0.7 ms per cell at 3000).
class HeldLookup {
 public:
  explicit HeldLookup(const std::vector<std::string>& held) : held_(held) {}
  bool Has(std::string_view name) {
    if (set_.empty() && !held_.empty()) set_.insert(held_.begin(), held_.end());
    return set_.count(name) != 0;
  }

 private:
  const std::vector<std::string>& held_;
  std::unordered_set<std::string_view> set_;
};

// The digests of `base` for delta checkpoints against it, when it is large
// enough to pay and the store can append (null otherwise).
std::shared_ptr<const BaseDigests> DigestsIfWorth(std::size_t size, std::string_view base,
                                                  const DurabilityContext& context) {
  if (size < SessionJournal::kMinDeltaBase || !context.store_appends.load()) return nullptr;
  StatusOr<BaseDigests> digested = DigestBase(base);
  if (!digested.ok()) return nullptr;
  return std::make_shared<const BaseDigests>(std::move(digested).value());
}

}  // namespace

SessionDurability::SessionDurability(std::string session_id, DurabilityContext& context,
                                     const SessionGateMemory& gate_memory)
    : session_id_(std::move(session_id)), context_(context), gate_memory_(gate_memory) {}

// ------------------------------------------------------------ made live

void SessionDurability::Restored(std::string_view blob, const SplitCheckpoint& split,
                                 LoadReport* report) {
  // What the store gave back is durable; a new session has nothing yet.
  durable_at_ns_.store(blob.empty() ? 0 : SteadyNs());
  changed_cell_ = cells_started_;
  saved_cell_.store(cells_started_);
  deferred_since_ns_ = 0;
  std::shared_ptr<const BaseDigests> digests;
  if (split.damage.empty()) digests = DigestsIfWorth(split.measured.size, split.base, context_);
  journal_.Restored(split, cells_started_, std::move(digests));
  // A base the session could not restore (it started empty) or a journal
  // it could not apply is no base to append to: the session does not hold it.
  if (report && !report->error.empty()) journal_.Failed();
  if (!split.damage.empty()) {
    // The store's copy lost the changes from there on: the next cell, of
    // whatever kind, writes a whole checkpoint over it.
    durable_at_ns_.store(0);
    if (report) report->journal_damage = split.damage;
  }
}

void SessionDurability::ReportRestore(const LoadReport& report, Result& result) {
  for (const auto& name : report.failed) result.dropped.push_back(name);
  if (!report.error.empty()) {
    AppendWarning(result, "warning: the stored checkpoint could not be restored: " + report.error);
  }
  if (!report.journal_damage.empty()) {
    AppendWarning(result, "warning: the stored checkpoint's " + report.journal_damage +
                              ": the changes it held, and any after it, are lost");
  }
}

// ------------------------------------------------------------ a cell

std::uint64_t SessionDurability::BeginCell(CellRun& run) {
  const bool on = context_.mode != CheckpointMode::kOff;
  run.delta_base = on ? DeltaBase() : nullptr;
  run.checkpoint_owed = on && CheckpointOwed();
  covered_ = false;
  return ++cells_started_;
}

LiveSession::ChannelHandler SessionDurability::CellChannel(std::uint64_t cell) {
  return [this, cell](UniqueFd fd) {
    submitted_at_ns_.store(SteadyNs());
    deferred_since_ns_ = 0;  // written after this cell: it covers them
    covered_ = true;
    context_.saver->Submit(session_id_, std::move(fd), cell);
  };
}

void SessionDurability::EndCell(std::uint64_t cell, CellOutcome& outcome,
                                const TakeCheckpoint& take) {
  NoteOutcome(cell, outcome);
  Result& result = outcome.result;
  if (outcome.checkpoint) {
    SaveCellCheckpoint(cell, outcome, take);
  } else if ((outcome.read_only || outcome.binding) && context_.mode == CheckpointMode::kSync) {
    if (outcome.binding) {
      // Durable before the Result returns: a journal frame of what it
      // bound, else a whole checkpoint (the runner serializes in place).
      Status saved = SaveDeferred(take);
      if (!saved.ok()) ReportSaveFailure(result, saved);
    }
    ReportDroppedSync(result);
  } else if (context_.mode == CheckpointMode::kAsync) {
    ReportDroppedAsync(cell, outcome, result);
  }
  ReportEarlierSaveError(result);
}

void SessionDurability::NoteOutcome(std::uint64_t cell, CellOutcome& outcome) {
  if (!outcome.read_only) changed_cell_ = cell;
  // What the journal can hold: a binding cell's values; after any other
  // change (a killed cell's too), only a whole checkpoint of it.
  if (covered_ || outcome.checkpoint) {
    journal_.Covered(cell);
  } else if (outcome.binding) {
    journal_.Add(std::move(outcome.bindings));
  } else if (!outcome.read_only) {
    journal_.Break();
  }
  if (outcome.binding && !covered_ && context_.mode == CheckpointMode::kAsync &&
      deferred_since_ns_ == 0) {
    // No checkpoint follows it: one is owed within the delay (the next cell
    // after that takes it, or the timer does while the session is idle).
    deferred_since_ns_ = SteadyNs();
    ScheduleDue();
  }
  if (outcome.runner_died) {
    // The next cell, read-only or not, writes a checkpoint of the state it
    // finds: the one the runner still held may be gone with it.
    durable_at_ns_.store(0);
    submitted_at_ns_.store(0);
  }
}

void SessionDurability::SaveCellCheckpoint(std::uint64_t cell, CellOutcome& outcome,
                                           const TakeCheckpoint& take) {
  bool needs_whole = false;
  Status saved = SaveCheckpoint(*outcome.checkpoint, cell, &needs_whole);
  // A delta the store could not take: durable before the Result returns
  // all the same, as a whole checkpoint the session writes in place.
  if (saved.ok() && needs_whole) {
    saved = take ? SaveNow(take)
                 : Status(ErrorCode::kUnavailable,
                          "the store could not take this cell's delta checkpoint, and "
                          "the session process is gone");
  }
  if (!saved.ok()) {
    ReportSaveFailure(outcome.result, saved);
    return;
  }
  std::lock_guard<std::mutex> guard(mutex_);
  last_dropped_ = outcome.checkpoint->dropped;
  last_dropped_cell_ = cell;
}

void SessionDurability::ReportDroppedSync(Result& result) {
  // No checkpoint followed: the last one's verdict holds (a read-only
  // cell bound nothing; what a binding cell bound is plain, and a saved
  // frame took it off).
  std::lock_guard<std::mutex> guard(mutex_);
  HeldLookup held(result.held);
  for (const auto& name : last_dropped_) {
    if (held.Has(name)) result.dropped.push_back(name);
  }
  std::sort(result.dropped.begin(), result.dropped.end());
}

void SessionDurability::ReportDroppedAsync(std::uint64_t cell, const CellOutcome& outcome,
                                           Result& result) {
  // The session probed what this cell bound anew (result.dropped); the
  // last checkpoint that landed knows the rest (a value that cannot be
  // saved, put into an object in place).
  std::lock_guard<std::mutex> guard(mutex_);
  for (const auto& name : outcome.rebound) rebound_at_[name] = cell;
  HeldLookup held(result.held);
  // A read-only cell bound and deleted nothing: every name rebound_at keeps
  // is still held (pruned after the last cell that could delete one).
  if (!outcome.read_only) {
    for (auto it = rebound_at_.begin(); it != rebound_at_.end();) {
      it = held.Has(it->first) ? std::next(it) : rebound_at_.erase(it);
    }
  }
  if (!last_dropped_.empty()) {
    std::set<std::string> known(result.dropped.begin(), result.dropped.end());
    for (const auto& name : last_dropped_) {
      auto rebound = rebound_at_.find(name);
      const bool stale = rebound != rebound_at_.end() && rebound->second > last_dropped_cell_;
      if (held.Has(name) && !known.count(name) && !stale) result.dropped.push_back(name);
    }
  }
  std::sort(result.dropped.begin(), result.dropped.end());
}

void SessionDurability::ReportEarlierSaveError(Result& result) {
  // An earlier save that failed (async, or an eviction on this session's
  // behalf), reported once.
  std::lock_guard<std::mutex> guard(mutex_);
  if (last_save_error_.empty()) return;
  AppendWarning(result, "warning: an earlier checkpoint was not saved: " + last_save_error_);
  result.save_error =
      result.save_error ? *result.save_error + "; " + last_save_error_ : last_save_error_;
  last_save_error_.clear();
}

bool SessionDurability::CheckpointOwed() const {
  const std::int64_t now = SteadyNs();
  auto recent = [now](std::int64_t at) {
    return at != 0 && now - at <= std::chrono::nanoseconds(kReadOnlyCheckpointAge).count();
  };
  if (!recent(durable_at_ns_.load()) && !recent(submitted_at_ns_.load())) return true;
  if (saved_cell_.load() >= changed_cell_) return false;
  // A checkpoint of the session queued or being read by the saver.
  if (context_.mode == CheckpointMode::kAsync && context_.saver->Pending(session_id_)) return false;
  // Binding cells' changes wait out the delay (cells until then share one
  // checkpoint), then go to the journal (the timer appends a frame) or a
  // whole checkpoint; any other change whose checkpoint was lost is owed now.
  if (deferred_since_ns_ == 0) return true;
  return now - deferred_since_ns_ >= context_.delay_ns && !journal_.CanAppend();
}

std::shared_ptr<const BaseDigests> SessionDurability::DeltaBase() const {
  if (!context_.store_appends.load()) return nullptr;
  return journal_.DeltaBase();
}

// ------------------------------------------------------------ saving

Status SessionDurability::SaveCheckpoint(CheckpointData& data, std::uint64_t cell,
                                         bool* needs_whole) {
  std::string& blob = data.blob;
  if (data.delta && needs_whole == nullptr) {
    return CorruptError("the session sent a delta checkpoint where a whole one was asked for");
  }
  // The memory as it is now: it only grows while the session runs on, so it
  // covers whatever the blob holds (a rolled-back cell is in neither).
  DOLSOT_RETURN_IF_ERROR(AttachHostEntries(blob, gate_memory_.Get(), sandbox_mark_));
  if (data.delta) {
    std::optional<std::string> frame =
        context_.store_appends.load() ? journal_.DeltaFrame(data.delta_of, data.kept, blob)
                                      : std::nullopt;
    if (!frame) {
      *needs_whole = true;
      return Status::Ok();
    }
    Status appended = context_.store->Append(session_id_, *frame);
    if (!appended.ok()) {
      // Not retried: what part of the frame reached the store is unknown.
      if (appended.code() == ErrorCode::kUnimplemented) context_.store_appends.store(false);
      journal_.Failed();
      *needs_whole = true;
      return Status::Ok();
    }
    journal_.DeltaAppended(frame->size(), cell);
    durable_at_ns_.store(SteadyNs());
    NoteStored(cell);
    return Status::Ok();
  }
  Status saved = context_.store->Save(session_id_, blob);
  durable_at_ns_.store(saved.ok() ? SteadyNs() : 0);
  if (!saved.ok()) {
    journal_.BaseSaved(std::nullopt, cell);
    submitted_at_ns_.store(0);
    return saved;
  }
  StatusOr<CheckpointBase> base = MeasureBase(blob);
  std::shared_ptr<const BaseDigests> digests;
  if (base.ok()) digests = DigestsIfWorth(base->size, blob, context_);
  journal_.BaseSaved(base.ok() ? std::optional<CheckpointBase>(*base) : std::nullopt, cell,
                     std::move(digests));
  NoteStored(cell);
  return saved;
}

// The store holds the state after `cell` now: saved_cell_ moves up to it
// (async saves land out of turn, so it never moves down).
void SessionDurability::NoteStored(std::uint64_t cell) {
  std::uint64_t before = saved_cell_.load();
  while (before < cell && !saved_cell_.compare_exchange_weak(before, cell)) {
  }
  // A state the store could not take is covered by this one.
  std::uint64_t owed = whole_owed_after_.load();
  while (owed != 0 && owed <= cell && !whole_owed_after_.compare_exchange_weak(owed, 0)) {
  }
}

Status SessionDurability::SaveNow(const TakeCheckpoint& take) {
  if (!take) return Status(ErrorCode::kUnavailable, "the session process is gone");
  auto data = take();
  if (!data.ok()) return data.status();
  journal_.Covered(cells_started_);
  DOLSOT_RETURN_IF_ERROR(SaveCheckpoint(*data, cells_started_));
  deferred_since_ns_ = 0;
  std::lock_guard<std::mutex> guard(mutex_);
  last_dropped_ = std::move(data->dropped);
  last_dropped_cell_ = cells_started_;
  return Status::Ok();
}

bool SessionDurability::AppendFrame() {
  if (!context_.store_appends.load()) return false;
  std::optional<std::string> frame = journal_.NextFrame();
  if (!frame) return false;
  Status appended = context_.store->Append(session_id_, *frame);
  if (!appended.ok()) {
    // Not retried: what part of the frame reached the store is unknown.
    if (appended.code() == ErrorCode::kUnimplemented) context_.store_appends.store(false);
    journal_.Failed();
    return false;
  }
  const std::uint64_t cell = cells_started_;
  std::vector<std::string> saved = journal_.Appended(frame->size(), cell);
  durable_at_ns_.store(SteadyNs());
  NoteStored(cell);
  deferred_since_ns_ = 0;
  // The names it saved are plain values now, saved whatever held them before.
  std::lock_guard<std::mutex> guard(mutex_);
  last_dropped_.erase(std::remove_if(last_dropped_.begin(), last_dropped_.end(),
                                     [&](const std::string& name) {
                                       return std::binary_search(saved.begin(), saved.end(), name);
                                     }),
                      last_dropped_.end());
  return true;
}

Status SessionDurability::SaveDeferred(const TakeCheckpoint& take) {
  if (AppendFrame()) return Status::Ok();
  return SaveNow(take);
}

Status SessionDurability::SaveWhole(CheckpointData& data) {
  return SaveCheckpoint(data, cells_started_);
}

Status SessionDurability::SaveBranched(CheckpointData& data) {
  journal_.Covered(cells_started_);
  return SaveCheckpoint(data, cells_started_);
}

bool SessionDurability::CatchUpWithoutSerializing() {
  // Its last checkpoint (on its way, or landed) may hold this very state:
  // every cell since it was read-only. Then nothing is written at all.
  if (context_.mode == CheckpointMode::kAsync) context_.saver->Flush(session_id_);
  if (context_.mode != CheckpointMode::kOff && saved_cell_.load() >= changed_cell_ &&
      durable_at_ns_.load() != 0 && whole_owed_after_.load() == 0) {
    return true;
  }
  // Only binding cells changed it since the store's copy: a frame makes the
  // copy whole, with no serialization.
  return !context_.saver->Pending(session_id_) && AppendFrame();
}

void SessionDurability::SaveDue(const TakeCheckpoint& take) {
  if (deferred_since_ns_ == 0 && whole_owed_after_.load() == 0) return;
  if (context_.saver->Pending(session_id_)) {
    // An older checkpoint is still on its way: this one must land after it.
    ScheduleDue(std::chrono::milliseconds(10));
    return;
  }
  Status saved = SaveDeferred(take);
  if (!saved.ok()) NoteSaveError(saved.message());  // reported with the next Result
}

void SessionDurability::SaveLastState(const TakeCheckpoint& take) {
  if (saved_cell_.load() >= changed_cell_) return;
  Status saved = SaveDeferred(take);
  if (!saved.ok()) {
    NoteSaveError(saved.message());
    return;
  }
  std::lock_guard<std::mutex> guard(mutex_);
  last_save_error_.clear();  // the state it was about is durable now
}

void SessionDurability::SaveAsync(CheckpointData data, std::uint64_t cell) {
  {
    // Recorded before the save, so a caller who sees the save has landed also
    // sees what it could not hold.
    std::lock_guard<std::mutex> guard(mutex_);
    last_dropped_ = std::move(data.dropped);
    last_dropped_cell_ = cell;
  }
  bool needs_whole = false;
  Status saved = SaveCheckpoint(data, cell, &needs_whole);
  if (!saved.ok()) NoteSaveError(saved.message());  // reported with the next Result
  if (needs_whole) {
    // The delta could not extend what the store holds: the state after
    // `cell` is not stored. The next cell's checkpoint covers it (the cell
    // asks for one: CheckpointOwed), or, the session idle, the timer writes a
    // whole one once the checkpoint delay has passed, as for binding cells.
    durable_at_ns_.store(0);
    submitted_at_ns_.store(0);
    whole_owed_after_.store(cell);
    ScheduleDue();
  }
}

void SessionDurability::ScheduleDue(std::chrono::nanoseconds extra) {
  context_.timer->Schedule(session_id_, CheckpointTimer::Clock::now() +
                                            std::chrono::nanoseconds(context_.delay_ns) + extra);
}

// ------------------------------------------------------------ reports

bool SessionDurability::Owes() {
  if (context_.saver->Pending(session_id_)) return true;
  std::lock_guard<std::mutex> guard(mutex_);
  return !last_save_error_.empty();
}

void SessionDurability::NoteSaveError(const std::string& message) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (last_save_error_.find(message) == std::string::npos) {
    last_save_error_ += (last_save_error_.empty() ? "" : "; ") + message;
  }
}

void SessionDurability::NoteWarning(const std::string& warning) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!last_save_error_.empty()) last_save_error_ += "; ";
  last_save_error_ += warning;
}

std::string SessionDurability::TakeSaveError() {
  std::lock_guard<std::mutex> guard(mutex_);
  std::string error = std::move(last_save_error_);
  last_save_error_.clear();
  return error;
}

}  // namespace dolsot
