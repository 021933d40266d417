// A checkpoint's journal: what binding cells changed since the stored base
// blob, appended to it as frames (SessionStore::Append) instead of a new
// base, so the cost of their durability follows what they changed, not what
// the session holds (issue #22; docs/checkpoint-format.md "Journal"). No
// Python here: the host writes frames and checks a journal's bookkeeping;
// the session process splits what it restores with the same code.
//
// A frame holds the values of the names binding cells bound since the
// previous frame (marshal, as protocol::Bindings carries them), the
// session's cell count after them, its place in the journal (1, 2, ...) and
// the base it extends (MeasureBase: size and fingerprint), so a frame can
// never be applied to another base (a second host that saved the session
// meanwhile) or out of order.
//
// A delta frame holds a whole state of the session against the base: the
// names whose values are the base's (their entries' digests matched:
// BaseDigests), and a blob of every other name, the cell counter, the cell
// sources and the gate memory. So a cell on the general path writes what
// changed since the base, not what the session holds, and a later delta
// frame supersedes an earlier one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend_subprocess/checkpoint_metadata.h"
#include "backend_subprocess/latest_bindings.h"
#include "backend_subprocess/protocol.h"
#include "core/status.h"

namespace dolsot {

// Bounds of one frame (a binding cell's values are at most 64 KiB; the host
// coalesces at most kMaxPendingBindingBytes of them into one frame).
inline constexpr std::size_t kMaxJournalFrameBytes = 4u << 20;
inline constexpr std::size_t kMaxJournalNameBytes = 1u << 20;  // a base entry's too

// Frame number `seq` (1 for the first after the base) of the journal of
// `base`, holding `bindings` (names valid as ReadBindings checks them).
std::string EncodeJournalFrame(const CheckpointBase& base, std::uint32_t seq,
                               const protocol::Bindings& bindings);

// Delta frame number `seq` of the journal of `base`: the session holds the
// base's values of `kept` and the names of `blob` (a whole checkpoint blob,
// its gate memory attached), and nothing else.
std::string EncodeDeltaFrame(const CheckpointBase& base, std::uint32_t seq,
                             const std::vector<std::string>& kept, std::string_view blob);

// A stored checkpoint split into its base blob and its journal.
struct SplitCheckpoint {
  std::string_view base;  // the whole input when its base cannot be measured
  CheckpointBase measured;
  // The last whole, valid delta frame: the session's state is the base's
  // values of `delta_kept` (sorted) and the names of `delta_blob`, then
  // `bindings`. No delta frame: has_delta is false.
  bool has_delta = false;
  std::vector<std::string> delta_kept;
  std::string_view delta_blob;
  // What every whole, valid binding frame after the last delta frame (or
  // the base) bound, merged in order: the last value of each name, names in
  // the order first bound; cells_run is the last frame's (0: no such frame).
  protocol::Bindings bindings;
  std::uint32_t frames = 0;       // frames merged
  std::size_t journal_bytes = 0;  // their bytes
  // Empty, or why the frames from some point on were not merged (a torn
  // last frame, a damaged one, a frame of another base, out of order): the
  // changes they held are lost, and the journal must not be appended to.
  std::string damage;
};

// Splits `stored` (what a SessionStore's Load returned). Never fails: a
// base that cannot be measured is returned whole for the restore to judge,
// with no journal; damage stops the journal (above). Views point into
// `stored`.
SplitCheckpoint SplitJournal(std::string_view stored);

// The host's account of one session's journal: the base blob the store
// holds (saved or restored by this host), the frames after it, and the
// values binding cells bound that neither holds yet. A frame can be written
// only while those values are the only change since the state the store
// holds. Thread-safe: an async checkpoint's base is recorded on the saver
// thread, the rest under the session's turn.
class SessionJournal {
 public:
  // A whole checkpoint may replace base and journal once the journal has
  // this many frames, or more bytes than max(kMinBudget, the base's).
  static constexpr std::uint32_t kMaxFrames = 1024;
  static constexpr std::size_t kMinBudget = 1u << 20;
  // Values pending past this: the next save is whole (they would make a
  // frame past kMaxJournalFrameBytes).
  static constexpr std::size_t kMaxPendingBytes = 1u << 20;

  // A whole checkpoint of the state after `cell` (the session's
  // cells_started) was taken: written, or on its way to the store. Its base
  // holds every change so far.
  void Covered(std::uint64_t cell);
  // That checkpoint reached the store as `base` (nullopt: its save failed,
  // or its base could not be measured; frames wait for the next base).
  // `digests`: the base's (null: no delta frame can extend it).
  void BaseSaved(std::optional<CheckpointBase> base, std::uint64_t cell,
                 std::shared_ptr<const BaseDigests> digests = nullptr);
  // The session was restored, as the state after `cell`, from `split`: an
  // intact journal can be appended to (`digests`: its base's, or null).
  void Restored(const SplitCheckpoint& split, std::uint64_t cell,
                std::shared_ptr<const BaseDigests> digests = nullptr);
  // A binding cell's values (the last of each name is kept).
  void Add(protocol::Bindings bindings);
  // A change no frame can hold (a cell that took the general path without a
  // checkpoint, a killed cell): whole checkpoints until the next Covered.
  void Break();
  // Delta frames are offered for bases of at least this many bytes (a
  // smaller session's whole checkpoint costs less than the bookkeeping).
  static constexpr std::size_t kMinDeltaBase = 1u << 20;
  // The base the store holds, while delta frames may still be appended to
  // its journal (it is at least kMinDeltaBase, and the journal is within
  // half its bounds), with its values' digests; null otherwise: the next
  // checkpoint is whole.
  std::shared_ptr<const BaseDigests> DeltaBase() const;
  // The delta frame of a checkpoint taken against `of` (`blob` is its blob,
  // its gate memory attached), when the store holds that base and the
  // journal has room; nullopt: the store needs a whole checkpoint.
  std::optional<std::string> DeltaFrame(const CheckpointBase& of,
                                        const std::vector<std::string>& kept,
                                        std::string_view blob) const;
  // DeltaFrame's frame is in the store: it holds the state after `cell`
  // (binding cells' values added since stay pending).
  void DeltaAppended(std::size_t frame_bytes, std::uint64_t cell);
  // Whether NextFrame would give a frame.
  bool CanAppend() const;
  // The frame that brings the store to the session's current state, when
  // one can: the store holds the base the pending values extend, and the
  // journal stays within its bounds. nullopt: a whole checkpoint is due.
  std::optional<std::string> NextFrame() const;
  // NextFrame's frame is in the store: it holds the state after `cell`.
  // Returns the names the frame saved.
  std::vector<std::string> Appended(std::size_t frame_bytes, std::uint64_t cell);
  // An append failed (it may have left part of a frame): whole
  // checkpoints until the next base.
  void Failed();

 private:
  void BreakLocked();            // mutex_ held
  bool CanAppendLocked() const;  // mutex_ held

  mutable std::mutex mutex_;
  // The store's side: a base this host knows, its frames, and the cell
  // whose state base and frames hold.
  bool open_ = false;
  CheckpointBase base_;
  std::shared_ptr<const BaseDigests> digests_;  // base_'s, when deltas may extend it
  std::uint32_t frames_ = 0;
  std::size_t bytes_ = 0;
  std::uint64_t stored_cell_ = 0;
  // The session's side: values bound since the state after `from_` (when
  // `extends_`: no other change since), name -> marshal.
  bool extends_ = false;
  std::uint64_t from_ = 0;
  LatestBindings pending_;
};

}  // namespace dolsot
