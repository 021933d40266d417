// Result's pre-joined text and banners.
#include "core/result.h"

#include <gtest/gtest.h>

namespace dolsot {
namespace {

TEST(ResultTest, TextJoinsStdoutValueErrorAndBanner) {
  Result r;
  r.stdout_text = "hello\n";
  r.value = "3";
  r.held = {"x", "df"};
  EXPECT_EQ(r.Text(), "hello\n3\nsession now holds: x, df");
}

TEST(ResultTest, TextWithErrorAndDropped) {
  Result r;
  r.ok = false;
  r.exit_code = kExitFailure;
  r.error = "ZeroDivisionError: division by zero";
  r.dropped = {"sock"};
  r.held = {"sock"};
  EXPECT_EQ(r.Text(),
            "ZeroDivisionError: division by zero\n"
            "not persisted (live in this session process only): sock\n"
            "session now holds: sock");
}

TEST(ResultTest, EmptySessionSaysNothing) {
  Result r;
  EXPECT_EQ(r.HeldBanner(), "session now holds: nothing");
  EXPECT_EQ(r.DroppedBanner(), "");
}

}  // namespace
}  // namespace dolsot
