// Tests for file:// URIs (typecheck/file_uri.h).
#include "typecheck/file_uri.h"

#include <gtest/gtest.h>

#include <string>

namespace dolsot::typecheck {
namespace {

TEST(TypeGateFileUri, EncodesEverythingButUnreservedBytesAndSlashes) {
  EXPECT_EQ(FileUri("/tmp/a-b_c.d~e/f.py"), "file:///tmp/a-b_c.d~e/f.py");
  EXPECT_EQ(FileUri("/a b%c\x7f\"\\#?\xc3\xa9"), "file:///a%20b%25c%7F%22%5C%23%3F%C3%A9");
}

TEST(TypeGateFileUri, EveryByteRoundTrips) {
  std::string path = "/";
  for (int c = 1; c < 256; ++c) path += static_cast<char>(c);
  EXPECT_EQ(PathOfUri(FileUri(path)), path);
}

TEST(TypeGateFileUri, OtherUrisAndBrokenEscapesComeBackAsTheyAre) {
  EXPECT_EQ(PathOfUri("vendored://stdlib/builtins.pyi"), "vendored://stdlib/builtins.pyi");
  EXPECT_EQ(PathOfUri("file:///a%2"), "/a%2");
  EXPECT_EQ(PathOfUri("file:///a%zz"), "/a%zz");
  EXPECT_EQ(PathOfUri("file:///a%7f"), "/a\x7f");
}

}  // namespace
}  // namespace dolsot::typecheck
