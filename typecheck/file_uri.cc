// file:// URIs: percent-encoding paths and decoding them back (see file_uri.h).
#include "typecheck/file_uri.h"

#include <cstring>

namespace dolsot::typecheck {
namespace {

constexpr std::string_view kScheme = "file://";
constexpr char kHexDigits[] = "0123456789ABCDEF";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// ASCII letters and digits, '-', '.', '_', '~' and '/' (not locale-dependent).
bool IsUnreservedOrSlash(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c != 0 && std::strchr("/-._~", c) != nullptr);
}

}  // namespace

std::string FileUri(std::string_view path) {
  std::string out(kScheme);
  for (unsigned char c : path) {
    if (IsUnreservedOrSlash(c)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHexDigits[c >> 4];
      out += kHexDigits[c & 0xF];
    }
  }
  return out;
}

std::string PathOfUri(std::string_view uri) {
  if (uri.substr(0, kScheme.size()) != kScheme) return std::string(uri);
  std::string out;
  for (std::size_t i = kScheme.size(); i < uri.size(); ++i) {
    int high = uri[i] == '%' && i + 2 < uri.size() ? HexValue(uri[i + 1]) : -1;
    int low = high >= 0 ? HexValue(uri[i + 2]) : -1;
    if (low >= 0) {
      out += static_cast<char>(high * 16 + low);
      i += 2;
    } else {
      out += uri[i];
    }
  }
  return out;
}

}  // namespace dolsot::typecheck
