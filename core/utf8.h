// UTF-8, once for every part: well-formedness as Unicode defines it (table
// 3-7: no overlong forms, no UTF-16 surrogates, nothing above U+10FFFF), the
// same rule CPython's decoder applies to a cell's source.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace dolsot {

inline bool IsUtf8ContinuationByte(unsigned char c) { return (c & 0xC0) == 0x80; }

// Decodes the sequence at text[pos] into `code_point`; returns its length
// (1-4), or 0 when the bytes there are not one well-formed sequence
// (including a sequence cut short by the end of `text`, and pos past it).
std::size_t DecodeUtf8(std::string_view text, std::size_t pos, char32_t& code_point);

// Length (1-4) of the well-formed sequence at text[pos], or 0.
std::size_t Utf8SequenceLength(std::string_view text, std::size_t pos);

// Offset of the first byte that does not start a well-formed sequence.
std::optional<std::size_t> FindInvalidUtf8(std::string_view text);

}  // namespace dolsot
