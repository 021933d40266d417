// The checkpoint blob's format (docs/checkpoint-format.md), with no Python:
// its header and entry framing, written and read with every length checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dolsot {
namespace checkpoint_format {

// The format's integers: unsigned little-endian, `bytes` wide.
inline void PutLe(char* out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xFFu);
}
inline std::uint64_t GetLe(const char* in, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= std::uint64_t{static_cast<std::uint8_t>(in[i])} << (8 * i);
  return value;
}

inline constexpr char kMagic[8] = {'D', 'O', 'L', 'S', 'O', 'T', 'N', 'S'};
// Version 2 added codecs 4 (a cell's source) and 5 (the cell counter),
// version 3 codec 6 (the AST gate's memory, written by the host).
// Version 1 and 2 blobs are still read.
inline constexpr std::uint32_t kFormatVersion = 3;
// Magic, version, entry count.
inline constexpr std::size_t kHeaderSize = sizeof(kMagic) + 4 + 4;
// crc32c + codec + name length + payload length: the smallest possible entry.
inline constexpr std::size_t kEntryFixedSize = 4 + 1 + 4 + 8;
inline constexpr std::uint32_t kMaxNameBytes = 1u << 20;

enum class Codec : std::uint8_t {
  kPickle = 1,
  kDill = 2,
  kModuleRef = 3,
  kCellSource = 4,   // name: a cell's filename ("<cell N>"); payload: its source
  kCellCounter = 5,  // name: kCounterName; payload: u64, the cells the session ran
  kGateMemory = 6,   // name: kGateMemoryName; payload: GateMemory::Encode (host-written)
  kSandboxMark = 7,  // name: kSandboxMarkName; payload: sandbox/sandbox_mark.h (host-written)
};
inline constexpr std::string_view kCounterName = "<cells>";
inline constexpr std::string_view kGateMemoryName = "<gate>";
inline constexpr std::string_view kSandboxMarkName = "<sandbox>";

// Whether `codec` is one a blob of `version` may hold.
bool IsKnownCodec(std::uint8_t codec, std::uint64_t version);
// Codecs of a named value (pickle, dill, module reference): the entries a
// delta checkpoint may keep from its base.
bool IsValueCodec(std::uint8_t codec);
// "<cell N>" with N a positive decimal number: the filenames of cells
// (checkpoint.h's CellFilename), the only names a cell source is kept under.
bool IsCellFilename(std::string_view name);
// Whether `blob` starts with a header (magic and room for the rest).
bool HasHeader(std::string_view blob);
// kCorrupt: "checkpoint blob: <what> at byte <offset>".
Status CorruptAt(const std::string& what, std::size_t offset);

// Writers. The blob's header (magic, version, entry count) at `out`
// (kHeaderSize bytes).
void WriteBlobHeader(char* out, std::size_t entries);
// An entry's bytes after its checksum and before its payload (codec, name,
// payload size) at `frame`; returns their count. The checksum covers them.
std::size_t WriteEntryPrefix(char* frame, Codec codec, std::string_view name,
                             std::size_t payload_size);

// One entry to write: its payload is the concatenation of `payload`'s pieces.
struct BlobEntry {
  Codec codec;
  std::string_view name;
  std::vector<std::string_view> payload;
};
// The header and every entry in one string, sized once; each payload is
// copied and checksummed in the same pass.
std::string BuildBlob(const std::vector<BlobEntry>& entries);

// Readers. One entry's frame at `offset` of `blob`: its size (checksum
// included), codec, name and payload, every length checked against what is
// left of the blob; the checksum only when `verify`. Neither the codec nor
// the name is judged (ParseBlob does).
struct EntryFrame {
  std::size_t size = 0;
  std::uint8_t codec = 0;
  std::string_view name, payload;
};
StatusOr<EntryFrame> ReadEntryFrame(std::string_view blob, std::size_t offset, bool verify);

// An entry of a parsed blob, viewing the blob.
struct EntryView {
  Codec codec;
  std::string_view name;
  std::string_view payload;
};
// Validates the whole blob (magic, version, every frame, codec and checksum,
// what dolsot never writes, no trailing bytes) and returns views into it;
// kCorrupt naming the damage and where it is.
StatusOr<std::vector<EntryView>> ParseBlob(std::string_view blob);

}  // namespace checkpoint_format
}  // namespace dolsot
