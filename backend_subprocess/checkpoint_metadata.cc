// The host's side of a checkpoint blob (no Python): its base's size and
// digests, and the host's entries: the AST gate's memory and the sandbox mark
// (docs/checkpoint-format.md, codecs 6 and 7).
#include "backend_subprocess/checkpoint_metadata.h"

#include <cstring>
#include <optional>
#include <utility>

#include "backend_subprocess/checkpoint_format.h"
#include "core/crc32c.h"

namespace dolsot {

using checkpoint_format::Codec;
using checkpoint_format::CorruptAt;
using checkpoint_format::EntryFrame;
using checkpoint_format::GetLe;
using checkpoint_format::HasHeader;
using checkpoint_format::kEntryFixedSize;
using checkpoint_format::kFormatVersion;
using checkpoint_format::kGateMemoryName;
using checkpoint_format::kSandboxMarkName;
using checkpoint_format::kHeaderSize;
using checkpoint_format::PutLe;
using checkpoint_format::ReadEntryFrame;

StatusOr<CheckpointBase> MeasureBase(std::string_view stored) {
  if (!HasHeader(stored)) return CorruptError("checkpoint blob: not a dolsot checkpoint (bad magic)");
  uint32_t crc = CopyWithCrc32c(~0u, nullptr, stored.data(), kHeaderSize);
  const uint64_t count = GetLe(stored.data() + 12, 4);
  size_t offset = kHeaderSize;
  for (uint64_t i = 0; i < count; ++i) {
    StatusOr<EntryFrame> frame = ReadEntryFrame(stored, offset, /*verify=*/false);
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
    StatusOr<EntryFrame> frame = ReadEntryFrame(stored, offset, /*verify=*/false);
    if (!frame.ok()) return frame.status();
    if (checkpoint_format::IsValueCodec(frame->codec)) {
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
void AppendEntry(std::string& blob, Codec codec, std::string_view name, std::string_view payload) {
  const size_t at = blob.size();
  blob.resize(at + kEntryFixedSize + name.size() + payload.size());
  char* frame = blob.data() + at;
  const size_t prefix = checkpoint_format::WriteEntryPrefix(frame + 4, codec, name, payload.size());
  std::memcpy(frame + 4 + prefix, payload.data(), payload.size());
  PutLe(frame, ~CopyWithCrc32c(~0u, nullptr, frame + 4, blob.size() - at - 4), 4);
}

bool IsHostCodec(uint8_t codec) {
  return codec == static_cast<uint8_t>(Codec::kGateMemory) ||
         codec == static_cast<uint8_t>(Codec::kSandboxMark);
}

}  // namespace

Status AttachHostEntries(std::string& blob, const GateMemory& memory,
                         const std::optional<std::string>& sandbox_mark) {
  if (!HasHeader(blob) ||
      GetLe(blob.data() + 8, 4) != kFormatVersion) {
    return CorruptError("checkpoint blob: not a version " + std::to_string(kFormatVersion) +
                        " dolsot checkpoint, so the gate memory cannot be attached");
  }
  // Walk the frames (lengths only: the checksums are the restore's business)
  // and drop any host entry: only the host writes them.
  const uint64_t count = GetLe(blob.data() + 12, 4);
  uint64_t kept = 0;
  size_t read = kHeaderSize, write = kHeaderSize;
  for (uint64_t i = 0; i < count; ++i) {
    StatusOr<EntryFrame> frame = ReadEntryFrame(blob, read, /*verify=*/false);
    if (!frame.ok()) return frame.status();
    if (!IsHostCodec(frame->codec)) {
      if (write != read) std::memmove(blob.data() + write, blob.data() + read, frame->size);
      write += frame->size;
      ++kept;
    }
    read += frame->size;
  }
  if (read != blob.size()) return CorruptAt("trailing bytes after the last entry", read);
  blob.resize(write);
  AppendEntry(blob, Codec::kGateMemory, kGateMemoryName, memory.Encode());
  ++kept;
  if (sandbox_mark) {
    AppendEntry(blob, Codec::kSandboxMark, kSandboxMarkName, *sandbox_mark);
    ++kept;
  }
  PutLe(blob.data() + 12, kept, 4);
  return Status::Ok();
}

StatusOr<std::optional<std::string>> ReadSandboxMark(std::string_view blob) {
  if (blob.empty()) return std::optional<std::string>();
  if (!HasHeader(blob)) return CorruptError("checkpoint blob: not a dolsot checkpoint (bad magic)");
  const uint64_t version = GetLe(blob.data() + 8, 4);
  if (version < kFormatVersion) return std::optional<std::string>();  // older than marks
  if (version != kFormatVersion) {
    return CorruptError("checkpoint blob: unsupported format version " + std::to_string(version));
  }
  const uint64_t count = GetLe(blob.data() + 12, 4);
  size_t offset = kHeaderSize;
  std::optional<std::string> found;
  for (uint64_t i = 0; i < count; ++i) {
    // Lengths only (the restore checks the other entries' checksums); the
    // mark's own is checked here.
    StatusOr<EntryFrame> frame = ReadEntryFrame(blob, offset, /*verify=*/false);
    if (!frame.ok()) return frame.status();
    if (frame->codec == static_cast<uint8_t>(Codec::kSandboxMark)) {
      if (found || frame->name != kSandboxMarkName) return CorruptAt("a malformed sandbox mark", offset);
      StatusOr<EntryFrame> checked = ReadEntryFrame(blob, offset, /*verify=*/true);
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
  if (!HasHeader(blob)) {
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
    StatusOr<EntryFrame> frame = ReadEntryFrame(blob, offset, /*verify=*/true);
    if (!frame.ok()) return frame.status();
    if (frame->codec == static_cast<uint8_t>(Codec::kGateMemory)) {
      if (found || frame->name != kGateMemoryName) return CorruptAt("a malformed gate memory", offset);
      StatusOr<GateMemory> memory = GateMemory::Decode(frame->payload);
      if (!memory.ok()) return memory.status();
      found = *std::move(memory);
    }
    offset += frame->size;
  }
  return found ? *std::move(found) : unknown;
}

}  // namespace dolsot
