// The framing of FileStore's pending files (file_store.h, "Deferred
// durability"): the checkpoint's bytes, then a 20-byte trailer
//   magic "DOLSOTPF" | u64 LE length of the bytes | u32 LE CRC-32C of them.
// A pending file is written without fsync, so after a machine crash it may
// be short, hold zeroed or stale blocks, or be empty: PendingBlob accepts it
// only when the trailer is there, its length is exactly the bytes before it
// and their CRC matches. It guards against a torn write, not an adversary
// (the store's directory checks do that).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace dolsot {

inline constexpr std::size_t kPendingTrailerSize = 20;

// The trailer for `blob`.
std::string PendingTrailer(std::string_view blob);

// The blob a pending file's bytes frame, or nullopt when they are not a
// whole, intact pending file.
std::optional<std::string_view> PendingBlob(std::string_view file);

}  // namespace dolsot
