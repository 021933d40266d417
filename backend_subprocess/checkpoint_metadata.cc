// The host's side of a checkpoint blob (no Python): the AST gate's memory
// entry and the sandbox mark (docs/checkpoint-format.md, codecs 6 and 7).
#include "backend_subprocess/checkpoint_metadata.h"

#include "core/crc32c.h"

#include <array>
#include <cstring>
#include <optional>
#include <utility>

namespace dolsot {
namespace {

// The framing of docs/checkpoint-format.md (checkpoint.cc writes and parses
// the rest of it).
constexpr char kMagic[8] = {'D', 'O', 'L', 'S', 'O', 'T', 'N', 'S'};
constexpr uint32_t kFormatVersion = 3;  // checkpoint.cc's kFormatVersion
constexpr size_t kHeaderSize = sizeof(kMagic) + 4 + 4;
constexpr size_t kEntryFixedSize = 4 + 1 + 4 + 8;
constexpr uint32_t kMaxNameBytes = 1u << 20;
constexpr uint8_t kGateMemoryCodec = 6;
constexpr std::string_view kGateMemoryName = "<gate>";
constexpr uint8_t kSandboxMarkCodec = 7;
constexpr std::string_view kSandboxMarkName = "<sandbox>";

using checkpoint_format::GetLe;
using checkpoint_format::PutLe;

Status Corrupt(const std::string& what, size_t offset) {
  return CorruptError("checkpoint blob: " + what + " at byte " + std::to_string(offset));
}

// One entry's frame at `offset`: its size, codec, name and payload, lengths
// checked against the blob (the checksum only when `verify`).
struct Frame {
  size_t size = 0;
  uint8_t codec = 0;
  std::string_view name, payload;
};
StatusOr<Frame> ReadFrame(std::string_view blob, size_t offset, bool verify) {
  if (blob.size() - offset < kEntryFixedSize) return Corrupt("truncated entry header", offset);
  const char* at = blob.data() + offset;
  const uint64_t name_size = GetLe(at + 5, 4);
  if (name_size > kMaxNameBytes || blob.size() - offset - kEntryFixedSize < name_size) {
    return Corrupt("truncated name", offset);
  }
  const uint64_t payload_size = GetLe(at + 9 + name_size, 8);
  if (payload_size > blob.size() - offset - kEntryFixedSize - name_size) {
    return Corrupt("truncated payload", offset);
  }
  Frame frame;
  frame.size = kEntryFixedSize + name_size + payload_size;
  frame.codec = static_cast<uint8_t>(at[4]);
  frame.name = std::string_view(at + 9, name_size);
  frame.payload = std::string_view(at + 17 + name_size, payload_size);
  if (verify && static_cast<uint32_t>(GetLe(at, 4)) != ~CopyWithCrc32c(~0u, nullptr, at + 4, frame.size - 4)) {
    return Corrupt("checksum mismatch", offset);
  }
  return frame;
}

// Codecs of a named value (pickle, dill, module reference): the entries a
// delta checkpoint may keep from its base.
bool IsValueCodec(uint8_t codec) { return codec >= 1 && codec <= 3; }

}  // namespace

StatusOr<CheckpointBase> MeasureBase(std::string_view stored) {
  if (stored.size() < kHeaderSize || std::memcmp(stored.data(), kMagic, sizeof(kMagic)) != 0) {
    return CorruptError("checkpoint blob: not a dolsot checkpoint (bad magic)");
  }
  uint32_t crc = CopyWithCrc32c(~0u, nullptr, stored.data(), kHeaderSize);
  const uint64_t count = GetLe(stored.data() + 12, 4);
  size_t offset = kHeaderSize;
  for (uint64_t i = 0; i < count; ++i) {
    StatusOr<Frame> frame = ReadFrame(stored, offset, /*verify=*/false);
    if (!frame.ok()) return frame.status();
    crc = CopyWithCrc32c(crc, nullptr, stored.data() + offset, 4);
    offset += frame->size;
  }
  return CheckpointBase{offset, ~crc};
}

Digest128 EntryDigest(std::string_view codec_name_and_size, std::string_view payload) {
  DigestBuilder digest;
  digest.Update(payload);  // first: a writer knows the size only at the end
  digest.Update(codec_name_and_size);
  return digest.Finish();
}

StatusOr<BaseDigests> DigestBase(std::string_view stored) {
  StatusOr<CheckpointBase> base = MeasureBase(stored);
  if (!base.ok()) return base.status();
  BaseDigests digests;
  digests.base = *base;
  const uint64_t count = GetLe(stored.data() + 12, 4);
  size_t offset = kHeaderSize;
  for (uint64_t i = 0; i < count; ++i) {
    StatusOr<Frame> frame = ReadFrame(stored, offset, /*verify=*/false);
    if (!frame.ok()) return frame.status();
    if (IsValueCodec(frame->codec)) {
      const std::string_view entry = stored.substr(offset + 4, frame->size - 4);
      const size_t prefix = entry.size() - frame->payload.size();
      digests.entries[std::string(frame->name)] =
          EntryDigest(entry.substr(0, prefix), entry.substr(prefix));
    }
    offset += frame->size;
  }
  return digests;
}

namespace {

// Appends one entry (codec, name, payload) to `blob`, checksummed.
void AppendEntry(std::string& blob, uint8_t codec, std::string_view name, std::string_view payload) {
  const size_t at = blob.size();
  blob.resize(at + kEntryFixedSize + name.size() + payload.size());
  char* frame = blob.data() + at;
  frame[4] = static_cast<char>(codec);
  PutLe(frame + 5, name.size(), 4);
  std::memcpy(frame + 9, name.data(), name.size());
  PutLe(frame + 9 + name.size(), payload.size(), 8);
  std::memcpy(frame + 17 + name.size(), payload.data(), payload.size());
  PutLe(frame, ~CopyWithCrc32c(~0u, nullptr, frame + 4, blob.size() - at - 4), 4);
}

bool IsHostCodec(uint8_t codec) { return codec == kGateMemoryCodec || codec == kSandboxMarkCodec; }

}  // namespace

Status AttachHostEntries(std::string& blob, const GateMemory& memory,
                         const std::optional<std::string>& sandbox_mark) {
  if (blob.size() < kHeaderSize || std::memcmp(blob.data(), kMagic, sizeof(kMagic)) != 0 ||
      GetLe(blob.data() + 8, 4) != kFormatVersion) {
    return CorruptError("checkpoint blob: not a version " + std::to_string(kFormatVersion) +
                        " dolsot checkpoint, so the gate memory cannot be attached");
  }
  // Walk the frames (lengths only: the checksums are the restore's business)
  // and drop any host entry: only the host writes one.
  const uint64_t count = GetLe(blob.data() + 12, 4);
  uint64_t kept = 0;
  size_t read = kHeaderSize, write = kHeaderSize;
  for (uint64_t i = 0; i < count; ++i) {
    StatusOr<Frame> frame = ReadFrame(blob, read, /*verify=*/false);
    if (!frame.ok()) return frame.status();
    if (!IsHostCodec(frame->codec)) {
      if (write != read) std::memmove(blob.data() + write, blob.data() + read, frame->size);
      write += frame->size;
      ++kept;
    }
    read += frame->size;
  }
  if (read != blob.size()) return Corrupt("trailing bytes after the last entry", read);
  blob.resize(write);
  AppendEntry(blob, kGateMemoryCodec, kGateMemoryName, memory.Encode());
  ++kept;
  if (sandbox_mark) {
    AppendEntry(blob, kSandboxMarkCodec, kSandboxMarkName, *sandbox_mark);
    ++kept;
  }
  PutLe(blob.data() + 12, kept, 4);
  return Status::Ok();
}

StatusOr<std::optional<std::string>> ReadSandboxMark(std::string_view blob) {
  if (blob.empty()) return std::optional<std::string>();
  if (blob.size() < kHeaderSize || std::memcmp(blob.data(), kMagic, sizeof(kMagic)) != 0) {
    return CorruptError("checkpoint blob: not a dolsot checkpoint (bad magic)");
  }
  const uint64_t version = GetLe(blob.data() + 8, 4);
  if (version < kFormatVersion) return std::optional<std::string>();  // older than the mark
  if (version != kFormatVersion) {
    return CorruptError("checkpoint blob: unsupported format version " + std::to_string(version));
  }
  const uint64_t count = GetLe(blob.data() + 12, 4);
  size_t offset = kHeaderSize;
  std::optional<std::string> found;
  for (uint64_t i = 0; i < count; ++i) {
    // Lengths only, as a restore's first step: the mark's own checksum is
    // checked, every other entry's is the restore's business.
    StatusOr<Frame> frame = ReadFrame(blob, offset, /*verify=*/false);
    if (!frame.ok()) return frame.status();
    if (frame->codec == kSandboxMarkCodec) {
      if (found || frame->name != kSandboxMarkName) return Corrupt("a malformed sandbox mark", offset);
      StatusOr<Frame> checked = ReadFrame(blob, offset, /*verify=*/true);
      if (!checked.ok()) return checked.status();
      found = std::string(frame->payload);
    }
    offset += frame->size;
  }
  return found;
}

StatusOr<GateMemory> ReadGateMemory(std::string_view blob) {
  // A journal may follow the entries (checkpoint_journal.h): the base is
  // everything up to the last entry.
  if (blob.empty()) return GateMemory{};
  if (blob.size() < kHeaderSize || std::memcmp(blob.data(), kMagic, sizeof(kMagic)) != 0) {
    return CorruptError("checkpoint blob: not a dolsot checkpoint (bad magic)");
  }
  GateMemory unknown;
  unknown.complete = false;
  const uint64_t version = GetLe(blob.data() + 8, 4);
  if (version < kFormatVersion) return unknown;  // older than the memory
  if (version != kFormatVersion) {
    return CorruptError("checkpoint blob: unsupported format version " + std::to_string(version));
  }
  const uint64_t count = GetLe(blob.data() + 12, 4);
  size_t offset = kHeaderSize;
  std::optional<GateMemory> found;
  for (uint64_t i = 0; i < count; ++i) {
    StatusOr<Frame> frame = ReadFrame(blob, offset, /*verify=*/true);
    if (!frame.ok()) return frame.status();
    if (frame->codec == kGateMemoryCodec) {
      if (found || frame->name != kGateMemoryName) return Corrupt("a malformed gate memory", offset);
      StatusOr<GateMemory> memory = GateMemory::Decode(frame->payload);
      if (!memory.ok()) return memory.status();
      found = *std::move(memory);
    }
    offset += frame->size;
  }
  return found ? *std::move(found) : unknown;
}

}  // namespace dolsot
