// The shared character classes of Python source (core/python_chars.h), byte by
// byte against the C library's classes in the "C" locale, which the scanners
// used before they shared them.
#include "core/python_chars.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string_view>

namespace dolsot {
namespace {

static_assert(IsAsciiNameStart('_') && !IsAsciiNameStart('7') && IsAsciiNameChar('7'));
static_assert(IsNameByte('\xc3') && IsNameStartByte('\xa9') && !IsAsciiNameChar('\xc3'));

TEST(PythonChars, EveryByteMatchesTheCLocaleClasses) {
  for (int value = 0; value < 256; ++value) {
    const char c = static_cast<char>(value);
    const bool non_ascii = value >= 0x80;
    const bool alpha = std::isalpha(value) != 0, alnum = std::isalnum(value) != 0;
    SCOPED_TRACE(value);
    EXPECT_EQ(IsAsciiDigit(c), std::isdigit(value) != 0);
    EXPECT_EQ(IsAsciiHexDigit(c), std::isxdigit(value) != 0);
    EXPECT_EQ(IsAsciiNameStart(c), alpha || c == '_');
    EXPECT_EQ(IsAsciiNameChar(c), alnum || c == '_');
    EXPECT_EQ(IsNonAsciiByte(c), non_ascii);
    EXPECT_EQ(IsNameStartByte(c), alpha || c == '_' || non_ascii);
    EXPECT_EQ(IsNameByte(c), alnum || c == '_' || non_ascii);
  }
}

TEST(PythonChars, NoOperatorQuoteOrNewlineIsANameByte) {
  for (char c : std::string_view("\n\r\t '\"#.,:;()[]{}+-*/%<>=!&|^~@\\")) {
    EXPECT_FALSE(IsNameByte(c)) << static_cast<int>(c);
  }
}

}  // namespace
}  // namespace dolsot
