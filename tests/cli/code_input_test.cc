// Reading code from a stream and the checks before it reaches a backend.
#include "cli/code_input.h"

#include <gtest/gtest.h>

#include <sstream>

namespace dolsot::cli {
namespace {

TEST(CheckCodeTest, AcceptsOrdinaryPython) {
  EXPECT_TRUE(CheckCode("x = 'caf\xC3\xA9'\nprint(x)\n").ok());
}

TEST(CheckCodeTest, RejectsANulByteAndSaysWhere) {
  Status status = CheckCode(std::string("x = 1\ny = \0", 11));
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("NUL byte at line 2, column 5"), std::string::npos)
      << status.message();
}

TEST(CheckCodeTest, RejectsInvalidUtf8AndNamesTheByte) {
  Status status = CheckCode("print('\xFF')");
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("not valid UTF-8: byte 0xff at line 1, column 8"),
            std::string::npos)
      << status.message();
}

TEST(CheckCodeTest, RejectsCodeOverTheLimit) {
  Status status = CheckCode(std::string(11, 'x'), 10);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(status.message().find("larger than 10 bytes"), std::string::npos);
  EXPECT_TRUE(CheckCode(std::string(10, 'x'), 10).ok());
}

TEST(ReadCodeTest, ReadsTheWholeStream) {
  std::istringstream in("print(1)\nprint(2)\n");
  auto code = ReadCode(in);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, "print(1)\nprint(2)\n");
}

// A stream that fails on its first read, as an unreadable stdin does.
class FailingBuffer : public std::streambuf {
 protected:
  int_type underflow() override { throw std::ios_base::failure("read error"); }
};

TEST(ReadCodeTest, AnUnreadableStreamIsBadInputNotAFailure) {
  FailingBuffer buffer;
  std::istream in(&buffer);
  auto code = ReadCode(in);
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().code(), ErrorCode::kInvalidArgument) << "exit 2, as the contract says";
  EXPECT_NE(code.status().message().find("stdin"), std::string::npos);
}

TEST(ReadCodeTest, StopsOnceTheLimitIsPassed) {
  std::istringstream in(std::string(200000, 'x'));
  auto code = ReadCode(in, 100000);
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace dolsot::cli
