// Session ids: the safe alphabet, length, and the reserved "all".
#include "core/session_id.h"

#include <gtest/gtest.h>

#include <string>

namespace dolsot {
namespace {

TEST(SessionIdTest, AcceptsTheSafeAlphabet) {
  for (const char* id : {"a", "task-42", "Task_42.v2", "0", "x.y-z_"}) {
    EXPECT_TRUE(ValidateSessionId(id).ok()) << id;
  }
  EXPECT_TRUE(ValidateSessionId(std::string(kMaxSessionIdLength, 'a')).ok());
}

TEST(SessionIdTest, RefusesIdsThatCouldEscapeOrConfuse) {
  const std::string cases[] = {"",       ".",        "..",     "../x",   "a/b",   "a\\b",
                               "-rf",    ".hidden",  "a b",    "a\nb",   "tab\t", "é",
                               "a:b",    "a*",       "~root",  "$HOME"};
  for (const auto& id : cases) {
    Status s = ValidateSessionId(id);
    EXPECT_FALSE(s.ok()) << id;
    EXPECT_EQ(s.code(), ErrorCode::kInvalidSession) << id;
  }
  EXPECT_FALSE(ValidateSessionId(std::string("a\0b", 3)).ok());
  EXPECT_FALSE(ValidateSessionId(std::string(kMaxSessionIdLength + 1, 'a')).ok());
}

TEST(SessionIdTest, ErrorNamesTheOffendingByte) {
  Status s = ValidateSessionId(std::string("ab\x01", 3));
  EXPECT_NE(s.message().find("0x01"), std::string::npos) << s.message();
  EXPECT_NE(ValidateSessionId("a/b").message().find("'/'"), std::string::npos);
}

TEST(SessionIdTest, AllIsReservedForReset) {
  EXPECT_FALSE(ValidateSessionId("all").ok());
  EXPECT_TRUE(ValidateResetTarget("all").ok());
  EXPECT_TRUE(ValidateResetTarget("task-1").ok());
  EXPECT_FALSE(ValidateResetTarget("../all").ok());
}

}  // namespace
}  // namespace dolsot
