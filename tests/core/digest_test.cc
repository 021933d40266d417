// Digest128 (core/digest.h): XXH3-128's published values, the same digest
// however the bytes are cut, and a different one for any change.
#include "core/digest.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <utility>

namespace dolsot {
namespace {

TEST(Digest, MatchesXxh3s128BitDigestOfTheEmptyInput) {
  // XXH3_128bits("", 0): xxHash's own test vector (low 64 bits, high 64 bits).
  const Digest128 empty = DigestOf("");
  EXPECT_EQ(empty.high, 0x99AA06D3014798D8ull);
  EXPECT_EQ(empty.low, 0x6001C324468D497Full);
  EXPECT_EQ(DigestBuilder().Finish(), empty);
}

TEST(Digest, IsTheSameHoweverTheBytesAreCut) {
  std::mt19937 random(7);
  std::string bytes(300000, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  const Digest128 whole = DigestOf(bytes);
  for (std::size_t piece : {1ul, 7ul, 64ul, 240ul, 4096ul, 65537ul}) {
    DigestBuilder builder;
    for (std::size_t at = 0; at < bytes.size(); at += piece) {
      builder.Update(std::string_view(bytes).substr(at, piece));
    }
    EXPECT_EQ(builder.Finish(), whole) << piece;
  }
}

TEST(Digest, DiffersForEveryFlippedBitAndEveryLength) {
  const std::string bytes = "a checkpoint entry's codec, name, size and payload";
  std::set<std::pair<std::uint64_t, std::uint64_t>> seen;
  const Digest128 original = DigestOf(bytes);
  seen.insert({original.low, original.high});
  for (std::size_t byte = 0; byte < bytes.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string changed = bytes;
      changed[byte] = static_cast<char>(changed[byte] ^ (1 << bit));
      const Digest128 digest = DigestOf(changed);
      EXPECT_TRUE(seen.insert({digest.low, digest.high}).second) << byte << ":" << bit;
    }
  }
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    const Digest128 digest = DigestOf(std::string_view(bytes).substr(0, size));
    EXPECT_TRUE(seen.insert({digest.low, digest.high}).second) << size;
  }
}

}  // namespace
}  // namespace dolsot
