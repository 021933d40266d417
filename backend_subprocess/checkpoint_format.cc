// The checkpoint blob's format: its writers and its bounds-checked readers
// (docs/checkpoint-format.md). The checksum is core/crc32c.h's.
#include "backend_subprocess/checkpoint_format.h"

#include <algorithm>
#include <cstring>

#include "core/crc32c.h"

namespace dolsot {
namespace checkpoint_format {

bool IsKnownCodec(std::uint8_t codec, std::uint64_t version) {
  return codec >= 1 && codec <= (version >= 3 ? 7 : version >= 2 ? 5 : 3);
}

bool IsValueCodec(std::uint8_t codec) { return codec >= 1 && codec <= 3; }

bool IsCellFilename(std::string_view name) {
  constexpr std::string_view kPrefix = "<cell ";
  if (name.size() <= kPrefix.size() + 1 || name.substr(0, kPrefix.size()) != kPrefix ||
      name.back() != '>') {
    return false;
  }
  std::string_view digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - 1);
  if (digits.size() > 20 || digits.front() == '0') return false;
  return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool HasHeader(std::string_view blob) {
  return blob.size() >= kHeaderSize && std::memcmp(blob.data(), kMagic, sizeof(kMagic)) == 0;
}

Status CorruptAt(const std::string& what, std::size_t offset) {
  return CorruptError("checkpoint blob: " + what + " at byte " + std::to_string(offset));
}

void WriteBlobHeader(char* out, std::size_t entries) {
  std::memcpy(out, kMagic, sizeof(kMagic));
  PutLe(out + 8, kFormatVersion, 4);
  PutLe(out + 12, entries, 4);
}

std::size_t WriteEntryPrefix(char* frame, Codec codec, std::string_view name,
                             std::size_t payload_size) {
  frame[0] = static_cast<char>(codec);
  PutLe(frame + 1, name.size(), 4);
  std::memcpy(frame + 5, name.data(), name.size());
  PutLe(frame + 5 + name.size(), payload_size, 8);
  return 1 + 4 + name.size() + 8;
}

std::string BuildBlob(const std::vector<BlobEntry>& entries) {
  auto payload_size = [](const BlobEntry& entry) {
    std::size_t size = 0;
    for (std::string_view piece : entry.payload) size += piece.size();
    return size;
  };
  std::size_t total = kHeaderSize;
  for (const BlobEntry& entry : entries) {
    total += kEntryFixedSize + entry.name.size() + payload_size(entry);
  }
  std::string blob(total, '\0');
  char* out = blob.data();
  WriteBlobHeader(out, entries.size());
  out += kHeaderSize;
  for (const BlobEntry& entry : entries) {
    char* crc_at = out;
    char* frame = out + 4;
    const std::size_t prefix = WriteEntryPrefix(frame, entry.codec, entry.name, payload_size(entry));
    std::uint32_t crc = CopyWithCrc32c(~0u, nullptr, frame, prefix);
    out = frame + prefix;
    for (std::string_view piece : entry.payload) {
      crc = CopyWithCrc32c(crc, out, piece.data(), piece.size());
      out += piece.size();
    }
    PutLe(crc_at, ~crc, 4);
  }
  return blob;
}

StatusOr<EntryFrame> ReadEntryFrame(std::string_view blob, std::size_t offset, bool verify) {
  if (blob.size() - offset < kEntryFixedSize) return CorruptAt("truncated entry header", offset);
  const char* at = blob.data() + offset;
  const std::uint64_t name_size = GetLe(at + 5, 4);
  if (name_size > kMaxNameBytes || blob.size() - offset - kEntryFixedSize < name_size) {
    return CorruptAt("truncated name", offset);
  }
  const std::uint64_t payload_size = GetLe(at + 9 + name_size, 8);
  if (payload_size > blob.size() - offset - kEntryFixedSize - name_size) {
    return CorruptAt("truncated payload", offset);
  }
  EntryFrame frame;
  frame.size = kEntryFixedSize + name_size + payload_size;
  frame.codec = static_cast<std::uint8_t>(at[4]);
  frame.name = std::string_view(at + 9, name_size);
  frame.payload = std::string_view(at + 17 + name_size, payload_size);
  if (verify && static_cast<std::uint32_t>(GetLe(at, 4)) !=
                    ~CopyWithCrc32c(~0u, nullptr, at + 4, frame.size - 4)) {
    return CorruptAt("checksum mismatch", offset);
  }
  return frame;
}

namespace {

// Reads one entry at `offset`, advancing it: a frame whose codec `version`
// knows, under a name of 1 to kMaxNameBytes bytes, its checksum verified.
StatusOr<EntryView> ParseEntry(std::string_view blob, std::uint64_t version, std::size_t& offset) {
  const std::size_t start = offset;
  if (blob.size() - offset < kEntryFixedSize) return CorruptAt("truncated entry header", start);
  const char* at = blob.data() + offset;
  const std::uint8_t codec = static_cast<std::uint8_t>(at[4]);
  const std::uint64_t name_size = GetLe(at + 5, 4);
  if (!IsKnownCodec(codec, version)) return CorruptAt("unknown codec " + std::to_string(codec), start);
  if (name_size == 0 || name_size > kMaxNameBytes) return CorruptAt("bad name length", start);
  StatusOr<EntryFrame> frame = ReadEntryFrame(blob, offset, /*verify=*/true);
  if (!frame.ok()) return frame.status();
  offset += frame->size;
  return EntryView{static_cast<Codec>(codec), frame->name, frame->payload};
}

}  // namespace

StatusOr<std::vector<EntryView>> ParseBlob(std::string_view blob) {
  if (!HasHeader(blob)) return CorruptError("checkpoint blob: not a dolsot checkpoint (bad magic)");
  const std::uint64_t version = GetLe(blob.data() + 8, 4);
  if (version != 1 && version != 2 && version != kFormatVersion) {
    return CorruptError("checkpoint blob: unsupported format version " + std::to_string(version));
  }
  const std::uint64_t count = GetLe(blob.data() + 12, 4);
  if (count > (blob.size() - kHeaderSize) / kEntryFixedSize) {
    return CorruptAt("entry count " + std::to_string(count) + " exceeds the blob", 12);
  }
  std::vector<EntryView> entries;
  entries.reserve(count);
  std::size_t offset = kHeaderSize;
  bool counted = false, remembered = false, marked = false;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::size_t start = offset;
    StatusOr<EntryView> entry = ParseEntry(blob, version, offset);
    if (!entry.ok()) return entry.status();
    // What dolsot never writes is damage, not data.
    if (entry->codec == Codec::kCellSource && !IsCellFilename(entry->name)) {
      return CorruptAt("a cell source under a name that is not a cell's", start);
    }
    if (entry->codec == Codec::kCellCounter &&
        (counted || entry->name != kCounterName || entry->payload.size() != 8)) {
      return CorruptAt("a malformed cell counter", start);
    }
    counted = counted || entry->codec == Codec::kCellCounter;
    if (entry->codec == Codec::kGateMemory) {
      if (remembered || entry->name != kGateMemoryName) {
        return CorruptAt("a malformed gate memory", start);
      }
      remembered = true;
    }
    if (entry->codec == Codec::kSandboxMark) {
      if (marked || entry->name != kSandboxMarkName) return CorruptAt("a malformed sandbox mark", start);
      marked = true;
    }
    entries.push_back(*entry);
  }
  if (offset != blob.size()) return CorruptAt("trailing bytes after the last entry", offset);
  // Every version 2 blob dolsot writes holds its cell counter, so one without
  // (an entry count of zero, say) is damage, not an empty session.
  if (version >= 2 && !counted) {
    return CorruptAt("no cell counter (every version 2 blob has one)", 12);
  }
  return entries;
}

}  // namespace checkpoint_format
}  // namespace dolsot
