// UTF-8 checks shared by the code validator and the JSON writer.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace dolsot::cli {

// Length (1-4) of the well-formed UTF-8 sequence starting at text[pos], or 0
// when the bytes there are not one (overlong forms, surrogates and code points
// above U+10FFFF are rejected, as the Unicode standard requires).
std::size_t Utf8SequenceLength(std::string_view text, std::size_t pos);

// Offset of the first byte that does not start a well-formed sequence.
std::optional<std::size_t> FindInvalidUtf8(std::string_view text);

}  // namespace dolsot::cli
