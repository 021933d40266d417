// str.format templates: decoding a string literal's body and listing the
// attribute names its replacement fields reach ("{0.__class__}" -> __class__).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dolsot::sandbox {

// Decodes the escapes of a (non-raw) string literal body into ASCII plus 0x80
// for every non-ASCII code point. Returns false when the body uses \N{...},
// whose value the gate does not know.
bool DecodeLiteralBody(std::string_view body, bool raw, std::string& out);

// The attribute names (after '.') in the replacement fields of a format
// template, nested fields in format specs included.
std::vector<std::string> FormatFieldAttributes(std::string_view decoded_template);

}  // namespace dolsot::sandbox
