// NFKC folding of identifiers to ASCII, from the generated nfkc_ascii_table.inc.
#include "sandbox/identifier.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "sandbox/source_text.h"

namespace dolsot::sandbox {
namespace {

struct NfkcAscii {
  std::uint32_t code_point;
  const char* ascii;
};

constexpr NfkcAscii kNfkcAscii[] = {
#include "sandbox/nfkc_ascii_table.inc"
};

const char* FoldToAscii(char32_t code_point) {
  auto it = std::lower_bound(
      std::begin(kNfkcAscii), std::end(kNfkcAscii), code_point,
      [](const NfkcAscii& row, char32_t cp) { return row.code_point < cp; });
  if (it == std::end(kNfkcAscii) || it->code_point != code_point) return nullptr;
  return it->ascii;
}

}  // namespace

std::string_view NormalizeIdentifier(std::string_view text, std::string& scratch) {
  bool ascii = std::all_of(text.begin(), text.end(),
                           [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  if (ascii) return text;
  scratch.clear();
  for (std::size_t i = 0; i < text.size();) {
    char32_t code_point = 0;
    std::size_t length = DecodeUtf8(text, i, code_point);
    if (length == 0) {  // not reachable after CheckSourceText; keep the byte
      scratch += text[i++];
      continue;
    }
    if (const char* folded = code_point >= 0x80 ? FoldToAscii(code_point) : nullptr) {
      scratch += folded;
    } else {
      scratch.append(text.substr(i, length));
    }
    i += length;
  }
  return scratch;
}

}  // namespace dolsot::sandbox
