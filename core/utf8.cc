// UTF-8 decoding and validation (Unicode 15, table 3-7).
#include "core/utf8.h"

namespace dolsot {

std::size_t DecodeUtf8(std::string_view text, std::size_t pos, char32_t& code_point) {
  if (pos >= text.size()) return 0;
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) {
    code_point = lead;
    return 1;
  }
  std::size_t length;
  char32_t value;
  char32_t minimum;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, value = lead & 0x1F, minimum = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, value = lead & 0x0F, minimum = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, value = lead & 0x07, minimum = 0x10000;
  } else {
    return 0;
  }
  if (pos + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if (!IsUtf8ContinuationByte(byte(pos + k))) return 0;
    value = (value << 6) | (byte(pos + k) & 0x3F);
  }
  if (value < minimum || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
  code_point = value;
  return length;
}

std::size_t Utf8SequenceLength(std::string_view text, std::size_t pos) {
  char32_t ignored;
  return DecodeUtf8(text, pos, ignored);
}

std::optional<std::size_t> FindInvalidUtf8(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t length = Utf8SequenceLength(text, pos);
    if (length == 0) return pos;
    pos += length;
  }
  return std::nullopt;
}

}  // namespace dolsot
