// Digest128: a 128-bit digest of bytes (XXH3-128, from xxHash), fast enough
// to run over every byte a checkpoint holds (tens of GB/s). It tells an
// unchanged value of a session from a changed one without comparing them
// (docs/checkpoint-format.md "Delta frames"): bytes that differ get the same
// digest by chance with a probability of about 2^-128. It is not a
// cryptographic hash: bytes crafted to collide can, which only lets a session's
// own cells make its own restore bring back an older value of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace dolsot {

struct Digest128 {
  std::uint64_t low = 0;
  std::uint64_t high = 0;
  friend bool operator==(const Digest128& a, const Digest128& b) {
    return a.low == b.low && a.high == b.high;
  }
  friend bool operator!=(const Digest128& a, const Digest128& b) { return !(a == b); }
};

// Streams bytes in; Finish() gives the digest of everything so far (the
// same as DigestOf their concatenation, however they were cut).
class DigestBuilder {
 public:
  DigestBuilder();
  ~DigestBuilder();
  DigestBuilder(const DigestBuilder&) = delete;
  DigestBuilder& operator=(const DigestBuilder&) = delete;

  void Update(std::string_view bytes);
  Digest128 Finish() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

Digest128 DigestOf(std::string_view bytes);

}  // namespace dolsot
