// A checkpoint's journal frames (docs/checkpoint-format.md "Journal").
#include "backend_subprocess/checkpoint_journal.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "backend_subprocess/checkpoint_format.h"
#include "core/crc32c.h"

namespace dolsot {
namespace {

using checkpoint_format::GetLe;
using checkpoint_format::PutLe;

constexpr char kFrameMagic[4] = {'D', 'J', 'N', 'L'};
constexpr char kDeltaMagic[4] = {'D', 'J', 'N', 'D'};
constexpr std::size_t kFramePrefix = 4 + 4 + 4;      // magic, crc, size
constexpr std::size_t kBodyFixed = 8 + 4 + 4 + 8 + 4;  // base size, fingerprint, seq, cells, count
constexpr std::size_t kDeltaFixed = 8 + 4 + 4 + 4;     // base size, fingerprint, seq, kept count
constexpr std::uint64_t kMaxDeltaBody = 0xFFFFFFFFu;   // the size field's reach

// Reads a body's fields in order; any read past its end fails it.
class BodyReader {
 public:
  explicit BodyReader(std::string_view body) : body_(body) {}
  std::uint64_t Le(int bytes) {
    if (failed_ || body_.size() - at_ < static_cast<std::size_t>(bytes)) {
      failed_ = true;
      return 0;
    }
    const std::uint64_t value = GetLe(body_.data() + at_, bytes);
    at_ += static_cast<std::size_t>(bytes);
    return value;
  }
  std::string_view Bytes(std::uint64_t size) {
    if (failed_ || body_.size() - at_ < size) {
      failed_ = true;
      return {};
    }
    std::string_view out = body_.substr(at_, size);
    at_ += size;
    return out;
  }
  // Everything not read yet.
  std::string_view Rest() {
    if (failed_) return {};
    std::string_view out = body_.substr(at_);
    at_ = body_.size();
    return out;
  }
  bool whole() const { return !failed_ && at_ == body_.size(); }
  bool failed() const { return failed_; }

 private:
  std::string_view body_;
  std::size_t at_ = 0;
  bool failed_ = false;
};


// Writes one frame: magic, checksum, size, then the body's fields in order;
// Seal() fills the checksum in.
class FrameWriter {
 public:
  FrameWriter(const char (&magic)[4], std::size_t body) : frame_(kFramePrefix + body, '\0') {
    std::memcpy(frame_.data(), magic, sizeof(magic));
    PutLe(frame_.data() + 8, body, 4);
    at_ = frame_.data() + kFramePrefix;
  }
  void Le(std::uint64_t value, int bytes) {
    PutLe(at_, value, bytes);
    at_ += bytes;
  }
  void Raw(std::string_view bytes) {
    std::memcpy(at_, bytes.data(), bytes.size());
    at_ += bytes.size();
  }
  void Sized(std::string_view bytes) {  // u32 length, then the bytes
    Le(bytes.size(), 4);
    Raw(bytes);
  }
  std::string Seal() {
    PutLe(frame_.data() + 4, Crc32c(std::string_view(frame_).substr(8)), 4);
    return std::move(frame_);
  }

 private:
  std::string frame_;
  char* at_;
};

}  // namespace

std::string EncodeJournalFrame(const CheckpointBase& base, std::uint32_t seq,
                               const protocol::Bindings& bindings) {
  std::size_t body = kBodyFixed;
  for (std::size_t i = 0; i < bindings.names.size(); ++i) {
    body += 4 + bindings.names[i].size() + 4 + bindings.values[i].size();
  }
  FrameWriter frame(kFrameMagic, body);
  frame.Le(base.size, 8);
  frame.Le(base.fingerprint, 4);
  frame.Le(seq, 4);
  frame.Le(bindings.cells_run, 8);
  frame.Le(bindings.names.size(), 4);
  for (std::size_t i = 0; i < bindings.names.size(); ++i) {
    frame.Sized(bindings.names[i]);
    frame.Sized(bindings.values[i]);
  }
  return frame.Seal();
}

std::string EncodeDeltaFrame(const CheckpointBase& base, std::uint32_t seq,
                             const std::vector<std::string>& kept, std::string_view blob) {
  std::size_t body = kDeltaFixed + blob.size();
  for (const std::string& name : kept) body += 4 + name.size();
  FrameWriter frame(kDeltaMagic, body);
  frame.Le(base.size, 8);
  frame.Le(base.fingerprint, 4);
  frame.Le(seq, 4);
  frame.Le(kept.size(), 4);
  for (const std::string& name : kept) frame.Sized(name);
  frame.Raw(blob);
  return frame.Seal();
}

SplitCheckpoint SplitJournal(std::string_view stored) {
  SplitCheckpoint split;
  split.base = stored;
  StatusOr<CheckpointBase> measured = MeasureBase(stored);
  if (!measured.ok()) return split;  // the restore says what is wrong with it
  split.measured = *measured;
  split.base = stored.substr(0, measured->size);
  LatestBindings merged;
  std::size_t offset = measured->size;
  auto stop = [&](const std::string& why) {
    split.damage = "journal frame " + std::to_string(split.frames + 1) + " at byte " +
                   std::to_string(offset) + " " + why;
  };
  while (offset < stored.size()) {
    const std::string_view rest = stored.substr(offset);
    if (rest.size() < kFramePrefix) {
      stop("is cut short (a write that did not finish)");
      break;
    }
    const bool delta = std::memcmp(rest.data(), kDeltaMagic, sizeof(kDeltaMagic)) == 0;
    if (!delta && std::memcmp(rest.data(), kFrameMagic, sizeof(kFrameMagic)) != 0) {
      stop("is not a journal frame (bad magic)");
      break;
    }
    const std::uint64_t size = GetLe(rest.data() + 8, 4);
    if (delta ? size < kDeltaFixed : size < kBodyFixed || size > kMaxJournalFrameBytes) {
      stop("has a bad length (" + std::to_string(size) + " bytes)");
      break;
    }
    if (rest.size() - kFramePrefix < size) {
      stop("is cut short (a write that did not finish)");
      break;
    }
    const std::string_view checked = rest.substr(8, 4 + size);
    if (static_cast<std::uint32_t>(GetLe(rest.data() + 4, 4)) != Crc32c(checked)) {
      stop("is damaged (checksum mismatch)");
      break;
    }
    BodyReader body(rest.substr(kFramePrefix, size));
    const std::uint64_t base_size = body.Le(8);
    const std::uint64_t fingerprint = body.Le(4);
    const std::uint64_t seq = body.Le(4);
    if (base_size != measured->size || fingerprint != measured->fingerprint) {
      stop("extends another checkpoint than the one stored before it");
      break;
    }
    if (seq != split.frames + 1u) {
      stop("is out of order (number " + std::to_string(seq) + ")");
      break;
    }
    if (delta) {
      std::vector<std::string> kept;
      const std::uint64_t count = body.Le(4);
      bool valid = count <= size / 4;
      for (std::uint64_t i = 0; valid && i < count; ++i) {
        const std::uint64_t name_size = body.Le(4);
        const std::string_view name =
            body.Bytes(name_size <= kMaxJournalNameBytes ? name_size : ~0ull);
        valid = !body.failed() && !name.empty() && name.find('\0') == std::string_view::npos &&
                (kept.empty() || kept.back() < name);
        if (valid) kept.emplace_back(name);
      }
      const std::string_view blob = valid ? body.Rest() : std::string_view();
      StatusOr<CheckpointBase> whole = MeasureBase(blob);
      if (!valid || !whole.ok() || whole->size != blob.size()) {
        stop("is malformed");
        break;
      }
      // A whole state against the base: what came before it is superseded.
      split.has_delta = true;
      split.delta_kept = std::move(kept);
      split.delta_blob = blob;
      merged.Clear();
    } else {
      protocol::Bindings frame;
      frame.cells_run = body.Le(8);
      const std::uint64_t count = body.Le(4);
      bool valid = count <= size / 8;
      for (std::uint64_t i = 0; valid && i < count; ++i) {
        const std::uint64_t name_size = body.Le(4);
        const std::string_view name = body.Bytes(name_size <= kMaxJournalNameBytes ? name_size : ~0ull);
        const std::string_view value = body.Bytes(body.Le(4));
        valid = !body.failed() && !name.empty() && name.find('\0') == std::string_view::npos;
        if (valid) {
          frame.names.emplace_back(name);
          frame.values.emplace_back(value);
        }
      }
      if (!valid || !body.whole()) {
        stop("is malformed");
        break;
      }
      merged.Merge(std::move(frame));
    }
    split.frames += 1;
    offset += kFramePrefix + size;
    split.journal_bytes += kFramePrefix + size;
  }
  split.bindings = merged.Take();
  return split;
}

void SessionJournal::Covered(std::uint64_t cell) {
  std::lock_guard<std::mutex> guard(mutex_);
  extends_ = true;
  from_ = cell;
  pending_.Clear();
}

void SessionJournal::BaseSaved(std::optional<CheckpointBase> base, std::uint64_t cell,
                               std::shared_ptr<const BaseDigests> digests) {
  std::lock_guard<std::mutex> guard(mutex_);
  open_ = base.has_value();
  if (base) base_ = *base;
  digests_ = open_ && digests && digests->base.size == base_.size &&
                     digests->base.fingerprint == base_.fingerprint
                 ? std::move(digests)
                 : nullptr;
  frames_ = 0;
  bytes_ = 0;
  stored_cell_ = cell;
}

void SessionJournal::Restored(const SplitCheckpoint& split, std::uint64_t cell,
                              std::shared_ptr<const BaseDigests> digests) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    open_ = !split.base.empty() && split.measured.size == split.base.size() && split.damage.empty();
    base_ = split.measured;
    digests_ = open_ && digests && digests->base.size == base_.size &&
                       digests->base.fingerprint == base_.fingerprint
                   ? std::move(digests)
                   : nullptr;
    frames_ = split.frames;
    bytes_ = split.journal_bytes;
    stored_cell_ = cell;
  }
  Covered(cell);
}

void SessionJournal::Add(protocol::Bindings bindings) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!extends_) return;
  for (const std::string& name : bindings.names) {
    if (name.size() > kMaxJournalNameBytes) {  // no frame could hold it
      BreakLocked();
      return;
    }
  }
  pending_.Merge(std::move(bindings));
  if (pending_.bytes() > kMaxPendingBytes) BreakLocked();
}

void SessionJournal::Break() {
  std::lock_guard<std::mutex> guard(mutex_);
  BreakLocked();
}

void SessionJournal::BreakLocked() {
  extends_ = false;
  pending_.Clear();
}

std::shared_ptr<const BaseDigests> SessionJournal::DeltaBase() const {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!open_ || !digests_ || base_.size < kMinDeltaBase || frames_ >= kMaxFrames / 2 ||
      bytes_ > base_.size / 2) {
    return nullptr;
  }
  return digests_;
}

std::optional<std::string> SessionJournal::DeltaFrame(const CheckpointBase& of,
                                                      const std::vector<std::string>& kept,
                                                      std::string_view blob) const {
  std::size_t body = kDeltaFixed + blob.size();
  for (const std::string& name : kept) {
    if (name.empty() || name.size() > kMaxJournalNameBytes) return std::nullopt;
    body += 4 + name.size();
  }
  std::lock_guard<std::mutex> guard(mutex_);
  if (!open_ || of.size != base_.size || of.fingerprint != base_.fingerprint ||
      frames_ >= kMaxFrames || body > kMaxDeltaBody ||
      bytes_ + kFramePrefix + body > std::max<std::uint64_t>(kMinBudget, base_.size)) {
    return std::nullopt;
  }
  return EncodeDeltaFrame(base_, frames_ + 1, kept, blob);
}

void SessionJournal::DeltaAppended(std::size_t frame_bytes, std::uint64_t cell) {
  std::lock_guard<std::mutex> guard(mutex_);
  frames_ += 1;
  bytes_ += frame_bytes;
  stored_cell_ = std::max(stored_cell_, cell);
}

bool SessionJournal::CanAppend() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return CanAppendLocked();
}

bool SessionJournal::CanAppendLocked() const {
  return open_ && extends_ && stored_cell_ == from_ && frames_ < kMaxFrames &&
         bytes_ + pending_.bytes() <= std::max<std::uint64_t>(kMinBudget, base_.size);
}

std::optional<std::string> SessionJournal::NextFrame() const {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!CanAppendLocked()) return std::nullopt;
  return EncodeJournalFrame(base_, frames_ + 1, pending_.Copy());
}

std::vector<std::string> SessionJournal::Appended(std::size_t frame_bytes, std::uint64_t cell) {
  std::vector<std::string> saved;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    frames_ += 1;
    bytes_ += frame_bytes;
    stored_cell_ = cell;
    saved = pending_.names();
  }
  Covered(cell);
  return saved;
}

void SessionJournal::Failed() {
  std::lock_guard<std::mutex> guard(mutex_);
  open_ = false;
  digests_.reset();
}

}  // namespace dolsot
