// The host's side of a checkpoint blob, with no Python: the session's AST-gate
// memory rides in the blob as one entry the host writes and reads, never the
// session (docs/checkpoint-format.md, codec 6). The checksum is core/crc32c.h's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/gate_memory.h"
#include "core/status.h"

namespace dolsot {

// The format's integers: unsigned little-endian, `bytes` wide.
namespace checkpoint_format {
inline void PutLe(char* out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xFFu);
}
inline std::uint64_t GetLe(const char* in, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= std::uint64_t{static_cast<std::uint8_t>(in[i])} << (8 * i);
  return value;
}
}  // namespace checkpoint_format

// `blob` (a current-version blob from SerializeNamespace) gets `memory` as
// its gate-memory entry; one the session wrote itself is dropped first. kCorrupt when `blob` is no such blob.
Status AttachGateMemory(std::string& blob, const GateMemory& memory);
// The memory a stored blob carries. An empty blob (a new session): a fresh,
// complete memory. A version 1 or 2 blob, or a version 3 blob without the
// entry: an incomplete one (the session's earlier cells are not known).
// Damage anywhere: kCorrupt.
StatusOr<GateMemory> ReadGateMemory(std::string_view blob);

}  // namespace dolsot
