// CRC-32C: the SSE4.2 instruction where the CPU has it, else a table.
#include "core/crc32c.h"

#include <array>
#include <cstring>

namespace dolsot {
namespace {

using std::size_t;
using std::uint32_t;
using std::uint64_t;
using std::uint8_t;

constexpr std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    table[i] = crc;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = MakeCrcTable();

uint32_t CopyWithCrcPortable(uint32_t crc, char* dst, const char* src, size_t n) {
  if (dst != nullptr) std::memcpy(dst, src, n);
  for (size_t i = 0; i < n; ++i) {
    crc = kCrcTable[(crc ^ static_cast<uint8_t>(src[i])) & 0xFFu] ^ (crc >> 8);
  }
  return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) uint32_t CopyWithCrcSse42(uint32_t crc, char* dst,
                                                            const char* src, size_t n) {
  uint64_t state = crc;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, src + i, 8);
    if (dst != nullptr) std::memcpy(dst + i, &word, 8);
    state = __builtin_ia32_crc32di(state, word);
  }
  return CopyWithCrcPortable(static_cast<uint32_t>(state), dst ? dst + i : nullptr,
                             src + i, n - i);
}
bool HaveSse42() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#endif

}  // namespace

uint32_t CopyWithCrc32c(uint32_t crc, char* dst, const char* src, size_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (HaveSse42()) return CopyWithCrcSse42(crc, dst, src, n);
#endif
  return CopyWithCrcPortable(crc, dst, src, n);
}


}  // namespace dolsot
