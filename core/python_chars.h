// What a byte of Python source is, once for every scanner that reads a cell
// before CPython does (docs/architecture.md, "Five scanners"): the classes only;
// what each scanner decides with them stays its own.
#pragma once

namespace dolsot {

constexpr bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

constexpr bool IsAsciiHexDigit(char c) {
  return IsAsciiDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// [A-Za-z_]: what starts an ASCII identifier.
constexpr bool IsAsciiNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// [A-Za-z0-9_]: what continues an ASCII identifier.
constexpr bool IsAsciiNameChar(char c) { return IsAsciiNameStart(c) || IsAsciiDigit(c); }

// A byte of a UTF-8 sequence for a character above U+007F (never a newline,
// a quote or an operator). Whatever the signedness of `char`.
constexpr bool IsNonAsciiByte(char c) { return static_cast<unsigned char>(c) >= 0x80; }

// A byte that may start a name, read byte by byte: an ASCII name start or any
// byte of a non-ASCII character (CPython takes such characters in names).
constexpr bool IsNameStartByte(char c) { return IsAsciiNameStart(c) || IsNonAsciiByte(c); }

// A byte that may continue a name (or a number: `1if` is one token to a byte
// scanner): an ASCII name character or any byte of a non-ASCII character.
constexpr bool IsNameByte(char c) { return IsAsciiNameChar(c) || IsNonAsciiByte(c); }

}  // namespace dolsot
