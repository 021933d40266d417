// Decoding of string literal bodies and scanning of str.format fields.
#include "sandbox/format_template.h"

#include <cctype>

namespace dolsot::sandbox {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendCodePoint(unsigned long value, std::string& out) {
  out += value < 0x80 ? static_cast<char>(value) : static_cast<char>(0x80);
}

// Reads up to `digits` hex digits at body[i]; appends the code point.
std::size_t DecodeHex(std::string_view body, std::size_t i, std::size_t digits,
                      std::string& out) {
  unsigned long value = 0;
  std::size_t n = 0;
  while (n < digits && i + n < body.size() && HexValue(body[i + n]) >= 0) {
    value = value * 16 + static_cast<unsigned long>(HexValue(body[i + n]));
    ++n;
  }
  AppendCodePoint(value, out);
  return n;
}

}  // namespace

bool DecodeLiteralBody(std::string_view body, bool raw, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || raw || i + 1 >= body.size()) {
      out += static_cast<unsigned char>(c) < 0x80 ? c : static_cast<char>(0x80);
      continue;
    }
    char e = body[++i];
    switch (e) {
      case '\n': break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': i += DecodeHex(body, i + 1, 2, out); break;
      case 'u': i += DecodeHex(body, i + 1, 4, out); break;
      case 'U': i += DecodeHex(body, i + 1, 8, out); break;
      case 'N': return false;
      default:
        if (e >= '0' && e <= '7') {
          unsigned long value = static_cast<unsigned long>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k) {
            value = value * 8 + static_cast<unsigned long>(body[++i] - '0');
          }
          AppendCodePoint(value, out);
        } else if (e == '\\' || e == '\'' || e == '"') {
          out += e;
        } else {  // unknown escape: CPython keeps the backslash
          out += '\\';
          out += static_cast<unsigned char>(e) < 0x80 ? e : static_cast<char>(0x80);
        }
    }
  }
  return true;
}

std::vector<std::string> FormatFieldAttributes(std::string_view text) {
  std::vector<std::string> attributes;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '{') continue;
    if (i + 1 < text.size() && text[i + 1] == '{') {
      ++i;
      continue;
    }
    // field_name: arg_name ("." attribute | "[" index "]")*, ended by } ! : or {
    std::size_t j = i + 1;
    while (j < text.size()) {
      char c = text[j];
      if (c == '}' || c == '!' || c == ':' || c == '{') break;
      if (c == '[') {
        std::size_t close = text.find(']', j);
        j = close == std::string_view::npos ? text.size() : close + 1;
        continue;
      }
      if (c == '.') {
        std::size_t k = j + 1;
        while (k < text.size() && text[k] != '.' && text[k] != '[' && text[k] != '}' &&
               text[k] != '!' && text[k] != ':' && text[k] != '{') {
          ++k;
        }
        attributes.emplace_back(text.substr(j + 1, k - j - 1));
        j = k;
        continue;
      }
      ++j;
    }
    i = j - 1;  // nested fields in a format spec are scanned next
  }
  return attributes;
}

}  // namespace dolsot::sandbox
