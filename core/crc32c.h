// CRC-32C (Castagnoli, the iSCSI/ext4 checksum): the checkpoint format's
// per-entry check (docs/checkpoint-format.md) and FileStore's pending files.
// SSE4.2 has an instruction for it; other machines use a table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dolsot {

// Extends `crc` (pre/post-inverted by the caller) over src[0..n) and, when
// `dst` is not null, copies the bytes to dst in the same pass.
std::uint32_t CopyWithCrc32c(std::uint32_t crc, char* dst, const char* src, std::size_t n);

// The CRC-32C of `bytes` (inverted before and after, as usual).
inline std::uint32_t Crc32c(std::string_view bytes) {
  return ~CopyWithCrc32c(~0u, nullptr, bytes.data(), bytes.size());
}

}  // namespace dolsot
