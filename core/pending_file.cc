// Pending files: the trailer written after the bytes, and its check.
#include "core/pending_file.h"

#include <cstdint>

#include "core/crc32c.h"

namespace dolsot {
namespace {

constexpr std::string_view kMagic = "DOLSOTPF";

void PutLe(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

std::uint64_t GetLe(std::string_view in, int bytes) {
  std::uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(in[i]);
  return value;
}

}  // namespace

std::string PendingTrailer(std::string_view blob) {
  std::string trailer(kMagic);
  PutLe(trailer, blob.size(), 8);
  PutLe(trailer, Crc32c(blob), 4);
  return trailer;
}

std::optional<std::string_view> PendingBlob(std::string_view file) {
  if (file.size() < kPendingTrailerSize) return std::nullopt;
  const std::string_view blob = file.substr(0, file.size() - kPendingTrailerSize);
  const std::string_view trailer = file.substr(blob.size());
  if (trailer.substr(0, kMagic.size()) != kMagic) return std::nullopt;
  if (GetLe(trailer.substr(8), 8) != blob.size()) return std::nullopt;
  if (GetLe(trailer.substr(16), 4) != Crc32c(blob)) return std::nullopt;
  return blob;
}

}  // namespace dolsot
