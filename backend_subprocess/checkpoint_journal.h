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
#pragma once

#include <cstddef>
#include <cstdint>
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

// A stored checkpoint split into its base blob and its journal.
struct SplitCheckpoint {
  std::string_view base;  // the whole input when its base cannot be measured
  CheckpointBase measured;
  // What every whole, valid frame bound, merged in order: the last value of
  // each name, names sorted; cells_run is the last frame's (0: no frame).
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
  void BaseSaved(std::optional<CheckpointBase> base, std::uint64_t cell);
  // The session was restored, as the state after `cell`, from `split`: an
  // intact journal can be appended to.
  void Restored(const SplitCheckpoint& split, std::uint64_t cell);
  // A binding cell's values (the last of each name is kept).
  void Add(protocol::Bindings bindings);
  // A change no frame can hold (a cell that took the general path without a
  // checkpoint, a killed cell): whole checkpoints until the next Covered.
  void Break();
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
