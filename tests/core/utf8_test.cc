// core/utf8: the one UTF-8 decoder and validator every part uses.
#include "core/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace dolsot {
namespace {

TEST(Utf8Test, FindsTheFirstInvalidByte) {
  EXPECT_EQ(FindInvalidUtf8("plain"), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("\xF0\x9F\x8D\x9A ok"), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8("ab\x80"), 2u);
  EXPECT_EQ(FindInvalidUtf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("\xE0\x80\x80"), 0u);      // overlong
  EXPECT_EQ(FindInvalidUtf8("\xC0\xAF"), 0u);          // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("\xED\xA0\x80"), 0u);      // a UTF-16 surrogate
  EXPECT_EQ(FindInvalidUtf8("ok\xE2\x82"), 2u);        // cut short by the end
}

TEST(Utf8Test, DecodesEveryLength) {
  char32_t cp = 0;
  EXPECT_EQ(DecodeUtf8("A", 0, cp), 1u);
  EXPECT_EQ(cp, U'A');
  EXPECT_EQ(DecodeUtf8("\xC3\xA9", 0, cp), 2u);
  EXPECT_EQ(cp, U'\u00E9');
  EXPECT_EQ(DecodeUtf8("\xE2\x82\xAC", 0, cp), 3u);
  EXPECT_EQ(cp, U'\u20AC');
  EXPECT_EQ(DecodeUtf8("\xF0\x9F\x8D\x9A", 0, cp), 4u);
  EXPECT_EQ(cp, U'\U0001F35A');
  EXPECT_EQ(DecodeUtf8("\xF4\x8F\xBF\xBF", 0, cp), 4u) << "U+10FFFF is the last one";
}

TEST(Utf8Test, RefusesWhatIsNotOneSequence) {
  char32_t cp = 0;
  EXPECT_EQ(DecodeUtf8("\x80", 0, cp), 0u) << "a lone continuation byte";
  EXPECT_EQ(DecodeUtf8("\xFF", 0, cp), 0u);
  EXPECT_EQ(DecodeUtf8("\xC3", 0, cp), 0u) << "truncated";
  EXPECT_EQ(DecodeUtf8("\xC3(", 0, cp), 0u) << "a lead byte without its continuation";
  EXPECT_EQ(DecodeUtf8("abc", 3, cp), 0u) << "past the end";
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82\xAC", 0), 3u);
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82\xAC", 1), 0u);
}

TEST(Utf8Test, ContinuationBytes) {
  EXPECT_TRUE(IsUtf8ContinuationByte(0x80));
  EXPECT_TRUE(IsUtf8ContinuationByte(0xBF));
  EXPECT_FALSE(IsUtf8ContinuationByte(0x7F));
  EXPECT_FALSE(IsUtf8ContinuationByte(0xC0));
}

}  // namespace
}  // namespace dolsot
