// Repl: sessions, the worker's lifecycle, routing, LRU eviction, branches and
// resets. The per-session protocol lives in LiveSession, the per-session
// durability policy (when and how checkpoints reach the store) in
// SessionDurability.
#include "backend_subprocess/repl.h"

#include <sys/resource.h>

#include <algorithm>
#include <map>
#include <atomic>
#include <chrono>
#include <limits>
#include <mutex>
#include <set>
#include <string_view>

#include "backend_subprocess/checkpoint_journal.h"
#include "backend_subprocess/checkpoint_metadata.h"
#include "backend_subprocess/checkpoint_saver.h"
#include "backend_subprocess/checkpoint_timer.h"
#include "backend_subprocess/deferred_closer.h"
#include "backend_subprocess/live_cell.h"
#include "backend_subprocess/live_session.h"
#include "backend_subprocess/repl_setup.h"
#include "backend_subprocess/session_durability.h"
#include "backend_subprocess/spare_session.h"
#include "backend_subprocess/worker_process.h"
#include "core/cell_pipeline.h"
#include "core/fifo_mutex.h"
#include "core/session_id.h"
#include "sandbox/sandbox_mark.h"
#include "typecheck/type_gate_stage.h"

namespace dolsot {
namespace {

using protocol::Clock;
using protocol::Deadline;

// The slot map is swept of slots nobody needs from this size on (Slot()).
constexpr std::size_t kPruneSlotsAt = 64;

Deadline After(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

// The live sessions this process has descriptors for: each holds two in
// the host (its runner's and its snapshot's sockets) and, in a burst of
// cells, up to two more for a while (checkpoint channels, retired snapshots'
// sockets); kDescriptorReserve are left for the Repl's own and the program's.
// Past it the least recently used session is evicted as past
// max_live_sessions, so a host at its RLIMIT_NOFILE does not fail cells.
constexpr long long kDescriptorsPerSession = 4;
constexpr long long kDescriptorReserve = 64;

int LiveSessionLimit(int max_live_sessions) {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) {
    return max_live_sessions;
  }
  const long long room = static_cast<long long>(files.rlim_cur) - kDescriptorReserve;
  const int by_files = static_cast<int>(
      std::clamp<long long>(room / kDescriptorsPerSession, 1, std::numeric_limits<int>::max()));
  return max_live_sessions <= 0 ? by_files : std::min(max_live_sessions, by_files);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// One session id's slot: its turn (FIFO), while live its processes, and what
// its state owes the store (SessionDurability).
struct SessionSlot {
  SessionSlot(std::string session_id, DurabilityContext& context)
      : durability(std::move(session_id), context, gate_memory) {}
  FifoMutex turn;
  std::unique_ptr<LiveSession> live;  // guarded by turn
  std::atomic<std::uint64_t> last_used{0};
  // Interrupt() asks the running cell to stop; cleared when a cell starts.
  std::atomic<bool> interrupt{false};
  // What the AST gate remembers of this session's cells (core/gate_memory.h):
  // read from the checkpoint when the session is made live, attached to
  // every checkpoint the host saves.
  SessionGateMemory gate_memory;
  SessionDurability durability;  // declared after gate_memory, which it reads
};

class Repl::Impl {
 public:
  Impl(ReplOptions options, Config config, std::shared_ptr<SessionStore> store)
      : options_(std::move(options)),
        config_(std::move(config)),
        store_(std::move(store)),
        saver_([this](const std::string& sid, CheckpointData data,
                      std::uint64_t cell) { SaveAsync(sid, std::move(data), cell); },
               &closer_) {
    durability_.mode = options_.checkpoint;
    durability_.delay_ns = static_cast<std::int64_t>(config_.checkpoint_delay_seconds * 1e9);
    durability_.store = store_.get();
    durability_.saver = &saver_;
    durability_.timer = &timer_;
    settings_.toolboxes = options_.toolboxes;
    settings_.python_path = options_.python_path;
    settings_.cwd = WorkerDirectory(options_);
    placement_.directory = options_.worker_directory;
    placement_.base_environment = options_.worker_base_environment;
    settings_.snapshots = options_.snapshots;
    settings_.checkpoint = options_.checkpoint;
    settings_.max_repr = config_.max_repr;
    settings_.sandbox = options_.sandbox;
    if (settings_.sandbox) {
      // The store stays on the host's side of the wall (the host writes
      // every checkpoint; sessions only send bytes), and so does its cwd; a
      // file store elsewhere than the cache directory too: a cell that could
      // read it would read other sessions' state, one that could write it
      // would write pickles a later restore loads.
      settings_.sandbox_hidden = SandboxHiddenPaths(config_, settings_.cwd, *store_);
    }
    command_ = options_.worker_command.empty() ? DefaultWorkerCommand() : options_.worker_command;
    pipeline_ = CellPipeline(Gates());
  }

  StatusOr<Result> Run(std::string_view sid, std::string_view code, const RunOptions& run_options);
  Status Interrupt(std::string_view sid);
  StatusOr<std::vector<SessionInfo>> Sessions();
  StatusOr<int> Reset(std::string_view target);
  Status Close();
  Status Branch(std::string_view source, std::string_view target);
  Status Release(std::string_view sid);
  std::vector<std::string> LiveSessions();
  std::size_t max_text() const { return config_.max_text; }
  int WorkerPid() {
    std::lock_guard<std::mutex> guard(mutex_);
    return worker_ ? worker_->pid() : -1;
  }
  std::size_t SlotCount() {
    std::lock_guard<std::mutex> guard(mutex_);
    return slots_.size();
  }
  std::uint64_t EvictionScans() const { return eviction_scans_.load(); }
  int MaxLiveSessions() const { return max_live_.load(); }
  void SetMaxLiveSessions(int n) { max_live_.store(n); }
  std::uint64_t Evictions() const { return evictions_.load(); }
  bool AwaitSpare(double seconds) { return spares_.AwaitReadyForTesting(After(seconds)); }
  StatusOr<SandboxReport> SandboxStatus() {
    if (!settings_.sandbox) return InvalidArgument("this Repl has no sandbox");
    auto worker = Worker(Clock::now() + std::chrono::seconds(60));
    if (!worker.ok()) return worker.status();
    return (*worker)->sandbox_report();
  }
  Status StartWorker() {
    auto worker = Worker(Clock::now() + std::chrono::seconds(60));
    return worker.ok() ? Status::Ok() : worker.status();
  }
  bool sandboxed() const { return settings_.sandbox.has_value(); }

 private:
  std::shared_ptr<SessionSlot> Slot(const std::string& sid);
  // Forgets the slots only the map holds whose session is not live and
  // owes nothing (mutex_ held).
  void PruneSlotsLocked();
  StatusOr<std::shared_ptr<WorkerProcess>> Worker(Deadline deadline);
  // The session's stored checkpoint; a store that cannot be read is an
  // error naming the session (never an empty session in its place).
  StatusOr<std::optional<std::string>> LoadStored(const std::string& sid);
  // Makes `slot` live from `blob` (may be empty); `slot->turn` is held.
  // The sandbox mark `sid`'s checkpoints carry once `blob` is restored
  // here, or kWeakerWalls when this Repl's walls are weaker than those it
  // was written under (sandbox_mark.h) and the options do not accept that.
  StatusOr<std::optional<std::string>> MarkOnRestore(const std::string& sid, std::string_view blob);
  Status MakeLive(const std::string& sid, SessionSlot& slot, const std::string& blob,
                  Deadline deadline, LoadReport* report);
  GateSet Gates() const;
  // The cell's run once the pipeline admitted it; `slot->turn` is held.
  StatusOr<Result> Execute(const std::string& sid, SessionSlot& slot, std::string_view code,
                           double timeout, Deadline deadline, const RunOptions& run_options);
  void EvictIfFull(const std::string& keep);
  Status Evict(const std::string& sid, SessionSlot& slot);
  // Keeps `warning` for the next Result of session `sid` (an eviction on
  // its behalf failed, say).
  void NoteWarning(const std::string& sid, const std::string& warning);
  LiveSession::ChannelHandler ChannelHandler(const std::string& sid) {
    return [this, sid](UniqueFd fd) { saver_.Submit(sid, std::move(fd), 0); };
  }
  // The live session serializing its state in place, for its durability's
  // whole checkpoints (empty when the session has no process).
  SessionDurability::TakeCheckpoint TakeCheckpoint(const std::string& sid, SessionSlot& slot) {
    if (!slot.live) return nullptr;
    return [this, sid, &slot] {
      return slot.live->Checkpoint(After(config_.timeout_seconds), ChannelHandler(sid));
    };
  }
  // The saver's call: hands an async checkpoint to its session's slot.
  void SaveAsync(const std::string& sid, CheckpointData data, std::uint64_t cell);
  // The timer's call: a checkpoint of `sid` now, when binding cells' changes
  // still wait for one (the session idle since).
  void CheckpointDue(const std::string& sid);
  Status CheckOpen() {
    std::lock_guard<std::mutex> guard(mutex_);
    if (closed_) return Status(ErrorCode::kUnavailable, "this Repl is closed");
    return Status::Ok();
  }

  ReplOptions options_;
  Config config_;
  std::shared_ptr<SessionStore> store_;
  WorkerSettings settings_;
  WorkerPlacement placement_;
  std::vector<std::string> command_;
  std::mutex mutex_;  // guards slots_, worker_, closed_
  std::map<std::string, std::shared_ptr<SessionSlot>> slots_;
  std::size_t prune_slots_at_ = kPruneSlotsAt;  // Slot() sweeps slots_ at this size
  std::atomic<std::uint64_t> eviction_scans_{0};  // slots EvictIfFull looked at (tests)
  // options_.max_live_sessions, which SetMaxLiveSessions may change while
  // cells run; and how many live sessions EvictIfFull has ended.
  std::atomic<int> max_live_{options_.max_live_sessions};
  std::atomic<std::uint64_t> evictions_{0};
  std::shared_ptr<WorkerProcess> worker_;
  bool closed_ = false;
  std::atomic<std::uint64_t> clock_{0};
  // What every slot's SessionDurability shares (the saver and timer below).
  DurabilityContext durability_;
  // Retired snapshots' sockets and superseded checkpoint channels: closed by
  // the saver thread after each checkpoint, else eight at a time
  // (deferred_closer.h). Declared before saver_, whose thread uses it.
  DeferredCloser closer_{8};
  CheckpointSaver saver_;
  CellPipeline pipeline_;
  // Writes binding cells' deferred checkpoints of idle sessions. Declared
  // last: stopped first (its calls use everything above).
  CheckpointTimer timer_{[this](const std::string& sid) { CheckpointDue(sid); }};
  // The next new session, opened ahead (spare_session.h); its thread uses
  // what is above, so it is stopped (and destroyed) first.
  // A worker's first waits until it has shared its pages ahead (its idle
  // 100 ms, worker_loop.cc's kShareAfterIdle, and a margin).
  SpareSession spares_{[this](const std::shared_ptr<WorkerProcess>& worker) {
                         return OpenSpareSession(worker, settings_,
                                                 After(std::max(config_.timeout_seconds, 10.0)));
                       },
                       std::chrono::milliseconds(150)};
};

GateSet Repl::Impl::Gates() const {
  GateSet gates;
  gates.ast_gate = options_.ast_gate;
  gates.caller_gate = options_.gate;
  if (config_.typecheck) {
    TypeGateSettings type_gate;
    type_gate.toolboxes = options_.toolboxes;
    type_gate.ty_bin = config_.ty_bin;
    type_gate.python_path =
        options_.python_path.empty() ? options_.typecheck_path : options_.python_path;
    type_gate.python_executable = options_.python_executable;
    AddTypeGate(gates, std::move(type_gate));
  }
  return gates;
}

std::shared_ptr<SessionSlot> Repl::Impl::Slot(const std::string& sid) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (slots_.size() >= prune_slots_at_) PruneSlotsLocked();
  auto& slot = slots_[sid];
  if (!slot) slot = std::make_shared<SessionSlot>(sid, durability_);
  return slot;
}

void Repl::Impl::PruneSlotsLocked() {
  // A slot only the map holds has no caller holding or awaiting its turn,
  // and none can get it but through Slot(): when its session is not live,
  // no checkpoint of it is on its way and no warning waits for its next
  // Result, forgetting it loses nothing (the next Run restores the session
  // from the store into a new slot, as after a restart). So the map stays
  // as large as the live sessions and the work in flight, not as every id
  // the Repl ever saw (amortized: the next sweep waits until it doubles).
  for (auto it = slots_.begin(); it != slots_.end();) {
    SessionSlot& slot = *it->second;
    bool forget = it->second.use_count() == 1 && slot.turn.try_lock();
    if (forget) {
      forget = !slot.live;  // read under its turn, as everywhere
      slot.turn.unlock();
    }
    forget = forget && !slot.durability.Owes();
    it = forget ? slots_.erase(it) : std::next(it);
  }
  prune_slots_at_ = std::max<std::size_t>(kPruneSlotsAt, 2 * slots_.size());
}

StatusOr<std::shared_ptr<WorkerProcess>> Repl::Impl::Worker(Deadline deadline) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (closed_) return Status(ErrorCode::kUnavailable, "this Repl is closed");
  if (!worker_) {
    auto started = WorkerProcess::Start(command_, options_.worker_environment, settings_, deadline,
                                        placement_);
    if (!started.ok()) return started.status();
    worker_ = std::move(started).value();
  }
  return worker_;
}

StatusOr<std::optional<std::string>> Repl::Impl::LoadStored(const std::string& sid) {
  auto loaded = store_->Load(sid);
  if (!loaded.ok()) {
    return Status(loaded.status().code(), "session store: cannot load session '" + sid +
                                              "': " + loaded.status().message());
  }
  return loaded;
}

StatusOr<std::optional<std::string>> Repl::Impl::MarkOnRestore(const std::string& sid,
                                                                std::string_view blob) {
  const std::optional<std::string> own =
      options_.sandbox ? std::optional<std::string>(EncodeSandboxMark(*options_.sandbox))
                       : std::nullopt;
  if (blob.empty()) return own;
  const SplitCheckpoint split = SplitJournal(blob);
  std::optional<SandboxPolicy> restored;
  for (std::string_view part : {split.base, split.has_delta ? split.delta_blob : std::string_view()}) {
    if (part.empty()) continue;
    StatusOr<std::optional<std::string>> read = ReadSandboxMark(part);
    StatusOr<SandboxPolicy> mark = SandboxPolicy{};
    if (read.ok() && read->has_value()) mark = DecodeSandboxMark(**read);
    // A mark that cannot be read could be any walls: the strictest answer.
    if (!read.ok() || !mark.ok()) {
      if (options_.accept_weaker_walls) continue;
      return Status(ErrorCode::kWeakerWalls,
                    "session '" + sid + "': its checkpoint's sandbox mark cannot be read (" +
                        (read.ok() ? mark.status() : read.status()).message() +
                        "), so it is not restored: a session made under a Sandbox is loaded only "
                        "under walls at least as strong. Reset the session, or pass "
                        "accept_weaker_walls=True (CLI --accept-weaker-walls) if its code is trusted");
    }
    if (!read->has_value()) continue;
    const std::string weaker = WeakerThanMark(options_.sandbox, *mark);
    if (!weaker.empty() && !options_.accept_weaker_walls) {
      return Status(ErrorCode::kWeakerWalls,
                    "session '" + sid + "' was checkpointed under a Sandbox and this Repl's walls "
                    "are weaker (" + weaker + "), so it is not restored: what its cells left "
                    "could run code when it is loaded. Run it with the same Sandbox (CLI: the "
                    "same --sandbox options), or pass accept_weaker_walls=True (CLI "
                    "--accept-weaker-walls) if its code is trusted");
    }
    restored = *std::move(mark);  // the newest part's mark last
  }
  const std::optional<SandboxPolicy> carried = CarriedMark(options_.sandbox, restored);
  if (!carried) return std::optional<std::string>();
  return std::optional<std::string>(EncodeSandboxMark(*carried));
}

Status Repl::Impl::MakeLive(const std::string& sid, SessionSlot& slot, const std::string& blob,
                            Deadline deadline, LoadReport* report) {
  // Before anything of it is unpickled: the walls it was written under.
  StatusOr<std::optional<std::string>> mark = MarkOnRestore(sid, blob);
  if (!mark.ok()) return mark.status();
  slot.durability.set_sandbox_mark(*std::move(mark));
  EvictIfFull(sid);
  for (int attempt = 0;; ++attempt) {
    auto worker = Worker(deadline);
    if (!worker.ok()) return worker.status();
    // A new session takes the one opened ahead, when this worker has one.
    std::unique_ptr<LiveSession> spare =
        blob.empty() && options_.spare_session ? spares_.Take(worker->get(), deadline) : nullptr;
    auto channel = spare ? StatusOr<ProcessChannel>(ProcessChannel{}) : (*worker)->OpenSession(deadline);
    if (!channel.ok()) {
      if (attempt == 0 && channel.status().code() == ErrorCode::kUnavailable) {
        // The worker died (or fell out of step): start a new one once.
        std::lock_guard<std::mutex> guard(mutex_);
        if (worker_ == *worker) worker_.reset();
        continue;
      }
      return channel.status();
    }
    auto live = spare ? StatusOr<std::unique_ptr<LiveSession>>(std::move(spare))
                      : LiveSession::Start(std::move(channel).value(), blob, settings_, deadline,
                                           report, *worker);
    if (!live.ok()) {
      if (attempt == 0 && live.status().code() == ErrorCode::kUnavailable) {
        // The session process the worker handed out was gone (killed from
        // outside while it waited as a spare, say): ask for another once.
        if (report) *report = LoadReport{};
        continue;
      }
      return live.status();
    }
    slot.live = std::move(live).value();
    const SplitCheckpoint split = SplitJournal(blob);
    slot.durability.Restored(blob, split, report);
    // A blob that cannot say (damaged, or older than the memory) leaves the
    // session's earlier cells unknown: the gate then assumes the worst.
    // The last delta frame's memory is the newest (it only grows).
    StatusOr<GateMemory> memory = ReadGateMemory(split.has_delta ? split.delta_blob : blob);
    if (!memory.ok()) {
      memory = GateMemory{};
      memory->complete = false;
    }
    slot.gate_memory.Set(*std::move(memory));
    return Status::Ok();
  }
}

void Repl::Impl::EvictIfFull(const std::string& keep) {
  // The limit is read anew after each count: a host that raises it before
  // its session's slot appears (the Ray pool) must not see that slot
  // counted against the old limit. RLIMIT_NOFILE bounds it too.
  auto max_live = [this] { return LiveSessionLimit(max_live_.load()); };
  std::set<std::string> kept;  // sessions that could not be evicted
  for (;;) {
    std::vector<std::pair<std::uint64_t, std::string>> live;
    std::map<std::string, std::shared_ptr<SessionSlot>> copy;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      // Fewer other slots than the limit: fewer live sessions too.
      if (slots_.size() - slots_.count(keep) < static_cast<std::size_t>(max_live())) {
        return;
      }
      copy = slots_;
    }
    eviction_scans_ += copy.size();
    int count = 0;
    for (auto& [sid, slot] : copy) {
      if (sid == keep) continue;
      if (!slot->turn.try_lock()) {
        ++count;  // busy, so live (or becoming live)
        continue;
      }
      if (slot->live) {
        ++count;
        live.emplace_back(slot->last_used.load(), sid);
      }
      slot->turn.unlock();
    }
    // A session whose eviction failed stays live, over the limit: the next
    // least recently used one is tried instead, each at most once here.
    live.erase(std::remove_if(live.begin(), live.end(),
                              [&](const auto& entry) { return kept.count(entry.second) > 0; }),
               live.end());
    if (count < max_live() || live.empty()) return;
    std::sort(live.begin(), live.end());
    const std::string& victim_id = live.front().second;
    auto& victim = copy[victim_id];
    if (!victim->turn.try_lock()) continue;
    const bool was_live = victim->live != nullptr;
    Status evicted = Evict(victim_id, *victim);
    if (was_live && !victim->live) ++evictions_;  // ended, with a checkpoint or not
    victim->turn.unlock();
    if (!evicted.ok()) {
      kept.insert(victim_id);
      NoteWarning(keep, "session '" + victim_id + "' " + evicted.message());
    }
  }
}

// Checkpoints and kills one live session; `slot.turn` is held. Eviction
// checkpoints even with checkpoints off: otherwise it would lose the state.
// When the checkpoint is not saved the session stays live (an error says
// so); when it cannot even be taken, the session's process is out of step
// or gone, and it is dropped: it goes back to its last checkpoint.
Status Repl::Impl::Evict(const std::string& sid, SessionSlot& slot) {
  if (!slot.live) return Status::Ok();
  // Its last checkpoint may hold this very state, or a journal frame make
  // the store's copy whole: then the session is not serialized at all.
  if (!slot.durability.CatchUpWithoutSerializing()) {
    auto data = slot.live->Checkpoint(After(config_.timeout_seconds), ChannelHandler(sid));
    saver_.Flush();  // an older async checkpoint must not land after this one
    if (!data.ok()) {
      slot.live.reset();
      (void)store_->Release(sid);  // a lease not given up expires by itself
      return Status(data.status().code(),
                    "was evicted (over max_live_sessions) without a checkpoint, which could not "
                    "be taken (" + data.status().message() + "); it goes back to its last one");
    }
    Status saved = slot.durability.SaveWhole(*data);
    if (!saved.ok()) {
      return Status(saved.code(), "stays live over max_live_sessions=" +
                                      std::to_string(max_live_.load()) +
                                      ": its checkpoint could not be saved (" + saved.message() +
                                      ")");
    }
  }
  slot.live.reset();
  closer_.CloseAll();  // see Reset
  (void)store_->Release(sid);
  return Status::Ok();
}

void Repl::Impl::NoteWarning(const std::string& sid, const std::string& warning) {
  std::shared_ptr<SessionSlot> slot;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = slots_.find(sid);
    if (it == slots_.end()) return;
    slot = it->second;
  }
  slot->durability.NoteWarning(warning);
}

void Repl::Impl::SaveAsync(const std::string& sid, CheckpointData data, std::uint64_t cell) {
  std::shared_ptr<SessionSlot> slot;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = slots_.find(sid);
    if (it == slots_.end()) return;  // reset meanwhile: do not resurrect it
    slot = it->second;
  }
  slot->durability.SaveAsync(std::move(data), cell);
}

void Repl::Impl::CheckpointDue(const std::string& sid) {
  std::shared_ptr<SessionSlot> slot;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = slots_.find(sid);
    if (closed_ || it == slots_.end()) return;
    slot = it->second;
  }
  std::lock_guard<FifoMutex> turn(slot->turn);
  if (slot->live) slot->durability.SaveDue(TakeCheckpoint(sid, *slot));
}

StatusOr<Result> Repl::Impl::Run(std::string_view sid_view, std::string_view code,
                                  const RunOptions& run_options) {
  DOLSOT_RETURN_IF_ERROR(ValidateRunRequest(sid_view, code, run_options));
  double timeout = run_options.timeout_seconds.value_or(config_.timeout_seconds);
  DOLSOT_RETURN_IF_ERROR(CheckTimeout(timeout, "timeout"));
  DOLSOT_RETURN_IF_ERROR(CheckOpen());
  std::string sid(sid_view);
  auto slot = Slot(sid);
  std::lock_guard<FifoMutex> turn(slot->turn);
  slot->last_used = ++clock_;
  slot->interrupt.store(false);
  auto deadline = After(timeout);

  // 1. The session, ready (restored from the store when not live).
  LoadReport report;
  const bool restored = !slot->live;
  bool opened_new = false;  // nothing stored: a new session (the spare's kind)
  if (restored) {
    static const std::vector<std::string> kNoNames;
    pipeline_.WarmUp({code, kNoNames, *deadline});  // ty starts while we restore
    // A checkpoint of this session still on its way (its process died after
    // the cells that wrote it, say) lands before the store is read.
    if (options_.checkpoint == CheckpointMode::kAsync) saver_.Flush(sid);
    auto blob = LoadStored(sid);
    if (!blob.ok()) return blob.status();
    opened_new = !blob->has_value();
    Status live = MakeLive(sid, *slot, blob->value_or(std::string()), deadline, &report);
    if (live.ok() && blob->has_value() && (*blob)->empty()) {
      // A zero-byte checkpoint is never written (it holds at least a header):
      // a file truncated or left empty by a full disk. Damage, not a session.
      report.error = "the stored checkpoint is empty (0 bytes), a damaged session file; "
                     "the session starts empty";
    }
    if (live.code() == ErrorCode::kInvalidToolbox || live.code() == ErrorCode::kWeakerWalls) return live;
    if (!live.ok()) {
      // Whatever failed, past the deadline it is the cell's timeout.
      const bool timed_out = live.code() == ErrorCode::kTimeout || Clock::now() >= *deadline;
      return Result::Failure(timed_out ? Outcome::kTimeout : Outcome::kWorkerLost,
                             timed_out ? kExitTimeout : kExitFailure,
                             (timed_out ? "TimeoutError: the cell's time ran out before it "
                                          "could start: "
                                        : "WorkerError: ") +
                                 live.message());
    }
  }
  // 2. The gates (the session is live, so a rejection says what it holds);
  // 3. the run.
  // The gates see the names the cell starts with (its variables and tools too).
  const bool extras = !run_options.tools.empty() || !run_options.variables.empty();
  std::vector<std::string> names_in_scope;
  if (extras) {
    names_in_scope = NamesInScope(slot->live->held(), run_options.tools, run_options.variables);
  }
  const GateRequest gate_request{code, extras ? names_in_scope : slot->live->held(), *deadline};
  const GateMemory memory_before = slot->gate_memory.Get();
  StatusOr<Result> result = pipeline_.Run(gate_request, slot->gate_memory, [&]() -> StatusOr<Result> {
    return Execute(sid, *slot, code, timeout, deadline, run_options);
  });
  // A cell that did not complete was rolled back (or its session lost, to be
  // restored from its last checkpoint): nothing it bound is left, so its
  // names go from the memory too. A cell that raised keeps what it bound
  // before the raise, and its names stay sealed.
  const bool kept = result.ok() && slot->live != nullptr &&
                    (result->outcome() == Outcome::kOk || result->outcome() == Outcome::kError ||
                     result->outcome() == Outcome::kRejected);
  if (!kept) slot->gate_memory.Set(memory_before);
  // The next new session is opened ahead now that this one's cell is done.
  if (opened_new && options_.spare_session && slot->live) spares_.Want(slot->live->worker().lock());
  if (!result.ok()) return result;
  if (restored) SessionDurability::ReportRestore(report, *result);
  return result;
}

StatusOr<Result> Repl::Impl::Execute(const std::string& sid, SessionSlot& slot,
                                     std::string_view code, double timeout, Deadline deadline,
                                     const RunOptions& run_options) {
  const StopCheck& should_stop = run_options.should_stop;
  CellRun run;
  run.code = code;
  run.max_output = config_.max_output;
  run.timeout_seconds = std::max(0.0, std::chrono::duration<double>(*deadline - Clock::now()).count());
  run.nominal_timeout = timeout;
  std::atomic<bool>& interrupt = slot.interrupt;
  run.should_stop = [&interrupt, &should_stop] {
    return interrupt.load() || (should_stop && should_stop());
  };
  run.tools = &run_options.tools;
  run.session_id = sid;
  run.variables = &run_options.variables;
  LiveCell live_cell(run_options, config_.max_output, run);  // RunOptions::live
  // The session's durability says what RUN asks of checkpoints, and is told
  // what the cell did: it saves what is due and fills the Result's part.
  const std::uint64_t cell = slot.durability.BeginCell(run);
  auto outcome = slot.live->Run(run, slot.durability.CellChannel(cell));
  live_cell.Finish();  // every callback made before the Result goes back
  if (!outcome.ok()) {
    slot.live.reset();  // out of step with the session: start over next time
    return outcome.status();
  }
  closer_.Add(std::move(outcome->retired_socket));
  if (outcome->session_lost) slot.live.reset();
  slot.durability.EndCell(cell, *outcome, TakeCheckpoint(sid, slot));
  return std::move(outcome->result);
}

Status Repl::Impl::Interrupt(std::string_view sid) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(sid));
  std::lock_guard<std::mutex> guard(mutex_);
  auto found = slots_.find(std::string(sid));
  if (found != slots_.end()) found->second->interrupt.store(true);
  return Status::Ok();
}

StatusOr<std::vector<SessionInfo>> Repl::Impl::Sessions() {
  // A checkpoint still being written lands first, so a session is listed
  // with its real size (a new session's first one, say), not as 0 bytes.
  if (options_.checkpoint == CheckpointMode::kAsync) saver_.Flush();
  auto stored = store_->List();
  if (!stored.ok()) return stored.status();
  std::vector<SessionInfo> out = std::move(stored).value();
  std::set<std::string> known;
  for (const auto& info : out) known.insert(info.id);
  std::map<std::string, std::shared_ptr<SessionSlot>> copy;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    copy = slots_;
  }
  for (auto& [sid, slot] : copy) {
    if (known.count(sid)) continue;
    if (slot->turn.try_lock()) {
      bool live = slot->live != nullptr;
      slot->turn.unlock();
      if (!live) continue;
    }
    SessionInfo info;
    info.id = sid;
    info.last_used = Now();
    out.push_back(info);
  }
  return out;
}

StatusOr<int> Repl::Impl::Reset(std::string_view target_view) {
  DOLSOT_RETURN_IF_ERROR(ValidateResetTarget(target_view));
  std::string target(target_view);
  bool all = target == kAllSessions;
  std::set<std::string> forgotten;
  std::vector<std::pair<std::string, std::shared_ptr<SessionSlot>>> victims;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (auto it = slots_.begin(); it != slots_.end();) {
      if (all || it->first == target) {
        victims.emplace_back(it->first, it->second);
        it = slots_.erase(it);  // late async saves for it are dropped
      } else {
        ++it;
      }
    }
  }
  for (auto& [sid, slot] : victims) {
    std::lock_guard<FifoMutex> turn(slot->turn);
    if (slot->live) forgotten.insert(sid);
    // A session that holds only what a new one holds (its snapshot is its
    // first: LiveSession::Recyclable) becomes a next new session, as a
    // pooled worker is handed back: its snapshot promoted, no fork. Not
    // under a Sandbox: there each session's keeper holds walls and a
    // scratch /tmp of its own, for one session lineage only.
    if (slot->live && options_.spare_session && !options_.sandbox && slot->live->Recyclable() &&
        spares_.HasRoomForRecycled() && slot->live->Recycle().ok()) {
      spares_.Give(std::move(slot->live));
    }
    slot->live.reset();
  }
  // A snapshot retired with the last Result exits when its socket closes:
  // when its runner is killed before it killed that snapshot, this is its end.
  closer_.CloseAll();
  // Their checkpoints still on the way are given up, not waited for: what
  // they would save is deleted below, and none may land after that.
  for (const auto& victim : victims) saver_.Drop(victim.first);
  if (all) saver_.Flush();
  if (all) {
    auto stored = store_->List();
    if (stored.ok()) {
      for (const auto& info : *stored) forgotten.insert(info.id);
    }
  }
  auto deleted = store_->Delete(target);
  for (const auto& victim : victims) (void)store_->Release(victim.first);
  if (!deleted.ok()) return deleted.status();
  if (!all && *deleted > 0) forgotten.insert(target);
  return static_cast<int>(forgotten.size());
}

Status Repl::Impl::Branch(std::string_view source_view, std::string_view target_view) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(source_view));
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(target_view));
  if (source_view == target_view) {
    return Status(ErrorCode::kInvalidSession, "branch: source and new session are the same id");
  }
  DOLSOT_RETURN_IF_ERROR(CheckOpen());
  std::string source(source_view), target(target_view);
  auto source_slot = Slot(source);
  auto target_slot = Slot(target);
  // Take both turns in id order, so two branches cannot deadlock.
  FifoMutex& first = source < target ? source_slot->turn : target_slot->turn;
  FifoMutex& second = source < target ? target_slot->turn : source_slot->turn;
  std::lock_guard<FifoMutex> first_turn(first);
  std::lock_guard<FifoMutex> second_turn(second);
  if (target_slot->live) {
    return Status(ErrorCode::kInvalidSession, "branch: session '" + target + "' already exists");
  }
  auto stored = store_->Load(target);
  if (!stored.ok()) return stored.status();
  if (stored->has_value()) {
    return Status(ErrorCode::kInvalidSession, "branch: session '" + target + "' already exists");
  }
  auto deadline = After(config_.timeout_seconds);
  LoadReport report;
  if (!source_slot->live) {
    auto blob = LoadStored(source);
    if (!blob.ok()) return blob.status();
    if (!blob->has_value()) {
      return Status(ErrorCode::kInvalidSession,
                    "branch: there is no session '" + source + "' to branch from");
    }
    DOLSOT_RETURN_IF_ERROR(MakeLive(source, *source_slot, **blob, deadline, &report));
  }
  auto channel = source_slot->live->Branch(deadline, ChannelHandler(source));
  if (!channel.ok()) {
    source_slot->live.reset();
    return channel.status();
  }
  target_slot->live =
      LiveSession::Adopt(std::move(channel).value(), settings_, source_slot->live->worker());
  // Its state is the source's: so are the walls it was made under.
  target_slot->durability.set_sandbox_mark(source_slot->durability.sandbox_mark());
  target_slot->last_used = ++clock_;
  target_slot->gate_memory.Set(source_slot->gate_memory.Get());
  if (options_.checkpoint != CheckpointMode::kOff) {
    auto data = target_slot->live->Checkpoint(deadline, ChannelHandler(target));
    if (data.ok()) DOLSOT_RETURN_IF_ERROR(target_slot->durability.SaveBranched(*data));
  }
  return Status::Ok();
}

Status Repl::Impl::Release(std::string_view sid_view) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(sid_view));
  std::string sid(sid_view);
  std::shared_ptr<SessionSlot> slot;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    auto found = slots_.find(sid);
    if (found == slots_.end()) return Status::Ok();
    slot = found->second;
  }
  std::lock_guard<FifoMutex> turn(slot->turn);
  if (!slot->live) return Status::Ok();
  Status evicted = Evict(sid, *slot);
  if (!evicted.ok()) return Status(evicted.code(), "cannot release session '" + sid + "': it " + evicted.message());
  return Status::Ok();
}

std::vector<std::string> Repl::Impl::LiveSessions() {
  std::map<std::string, std::shared_ptr<SessionSlot>> copy;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    copy = slots_;
  }
  std::vector<std::string> out;
  for (auto& [sid, slot] : copy) {
    if (slot->turn.try_lock()) {
      bool live = slot->live != nullptr;
      slot->turn.unlock();
      if (!live) continue;
    }
    out.push_back(sid);  // busy: live, or becoming live
  }
  return out;
}

Status Repl::Impl::Close() {
  std::map<std::string, std::shared_ptr<SessionSlot>> copy;
  std::shared_ptr<WorkerProcess> worker;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (closed_) return Status::Ok();
    closed_ = true;
    copy = slots_;
    worker = std::move(worker_);
  }
  spares_.Stop();  // the session opened ahead ends with its thread
  timer_.Stop();  // a deferred checkpoint still owed is written below
  // Collect every pending checkpoint channel, let them land, then kill.
  for (auto& [sid, slot] : copy) {
    std::lock_guard<FifoMutex> turn(slot->turn);
    if (slot->live) (void)slot->live->Settle(After(config_.timeout_seconds), ChannelHandler(sid));
  }
  // Every checkpoint on its way lands (or is abandoned after this patience:
  // a serializer that hangs must not hang Close).
  saver_.Stop(std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(std::max(config_.timeout_seconds, 10.0))));
  if (options_.checkpoint != CheckpointMode::kOff) {
    // A live session whose last state has no checkpoint in the store gets
    // one now, before its process goes and the state with it: its save
    // failed (reported with a Result, read-only cells having followed), was
    // abandoned above, or died with a runner (async coalescing).
    for (auto& [sid, slot] : copy) {
      std::lock_guard<FifoMutex> turn(slot->turn);
      if (slot->live) slot->durability.SaveLastState(TakeCheckpoint(sid, *slot));
    }
  }
  // A last state still not saved is reported here, whether or not a Result
  // reported its failed save: the session process goes now, and with it the
  // state. A close that returns normally means every session is durable.
  std::string unsaved;
  for (auto& [sid, slot] : copy) {
    std::lock_guard<FifoMutex> turn(slot->turn);
    slot->live.reset();
    const std::string error = slot->durability.TakeSaveError();
    if (!error.empty()) unsaved += (unsaved.empty() ? "" : "; ") + sid + ": " + error;
  }
  for (auto& [sid, slot] : copy) (void)store_->Release(sid);
  closer_.CloseAll();
  if (worker) worker->Stop();
  if (!unsaved.empty()) {
    return Status(ErrorCode::kIo, "closed, but the last state of these sessions was not saved "
                                  "(the store keeps an older one): " + unsaved);
  }
  return Status::Ok();
}

// ------------------------------------------------------------------ Repl

StatusOr<std::unique_ptr<Repl>> Repl::Create(ReplOptions options) {
  auto setup = CheckReplOptions(options);
  if (!setup.ok()) return setup.status();
  auto impl = std::make_unique<Impl>(std::move(options), std::move(setup->config),
                                     std::move(setup->store));
  return std::unique_ptr<Repl>(new Repl(std::move(impl)));
}

Repl::Repl(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Repl::~Repl() { (void)Close(); }

const Capabilities& Repl::capabilities() const {
  static const Capabilities kRepl = [] {
    Capabilities c;
    c.hard_timeout = true;
    c.crash_survival = true;
    c.branch = true;
    c.durable = true;
    c.tools = true;
    return c;
  }();
  static const Capabilities kSandboxed = [] {
    Capabilities c = kRepl;
    c.sandbox = true;  // a Repl with a Sandbox never runs a cell outside it
    return c;
  }();
  return impl_->sandboxed() ? kSandboxed : kRepl;
}

StatusOr<Result> Repl::Run(std::string_view session_id, std::string_view code,
                           const RunOptions& options) {
  StatusOr<Result> result = impl_->Run(session_id, code, options);
  if (result.ok()) result->max_text = impl_->max_text();
  return result;
}
Status Repl::Interrupt(std::string_view session_id) { return impl_->Interrupt(session_id); }
StatusOr<std::vector<SessionInfo>> Repl::Sessions() { return impl_->Sessions(); }
StatusOr<int> Repl::Reset(std::string_view target) { return impl_->Reset(target); }
Status Repl::Close() { return impl_->Close(); }
Status Repl::Branch(std::string_view source, std::string_view target) {
  return impl_->Branch(source, target);
}
int Repl::WorkerPid() const { return impl_->WorkerPid(); }
std::size_t Repl::SlotCountForTesting() const { return impl_->SlotCount(); }
std::uint64_t Repl::EvictionScansForTesting() const { return impl_->EvictionScans(); }
int Repl::MaxLiveSessions() const { return impl_->MaxLiveSessions(); }
Status Repl::SetMaxLiveSessions(int max_live_sessions) {
  Status valid = CheckMaxLiveSessions(max_live_sessions);
  if (valid.ok()) impl_->SetMaxLiveSessions(max_live_sessions);
  return valid;
}
std::uint64_t Repl::Evictions() const { return impl_->Evictions(); }
bool Repl::AwaitSpareForTesting(double seconds) { return impl_->AwaitSpare(seconds); }
Status Repl::Release(std::string_view session_id) { return impl_->Release(session_id); }
std::vector<std::string> Repl::LiveSessions() { return impl_->LiveSessions(); }
StatusOr<SandboxReport> Repl::SandboxStatus() { return impl_->SandboxStatus(); }
Status Repl::StartWorker() { return impl_->StartWorker(); }

}  // namespace dolsot
