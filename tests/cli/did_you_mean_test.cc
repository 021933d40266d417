// ClosestName and FirstUnknownLongOption: the CLI's "did you mean".
#include "cli/did_you_mean.h"

#include <gtest/gtest.h>

namespace dolsot::cli {
namespace {

const std::vector<std::string> kKnown = {"session", "timeout", "json", "sandbox", "store",
                                         "no-serve", "toolbox"};

TEST(ClosestName, FindsTyposWithinTwoEdits) {
  EXPECT_EQ(ClosestName("timout", kKnown), "timeout");    // a deletion
  EXPECT_EQ(ClosestName("timeoutt", kKnown), "timeout");  // an insertion
  EXPECT_EQ(ClosestName("sessoin", kKnown), "session");   // a swap of neighbours
  EXPECT_EQ(ClosestName("jsan", kKnown), "json");         // a substitution
  EXPECT_EQ(ClosestName("noserve", kKnown), "no-serve");
  EXPECT_EQ(ClosestName("toolbx", kKnown), "toolbox");
}

TEST(ClosestName, GuessesNothingFarOrShort) {
  EXPECT_EQ(ClosestName("cache-dir", kKnown), std::nullopt);
  EXPECT_EQ(ClosestName("x", kKnown), std::nullopt);    // one letter: everything is near
  EXPECT_EQ(ClosestName("js", kKnown), std::nullopt);   // 2 edits of 2 letters
  EXPECT_EQ(ClosestName("", kKnown), std::nullopt);
  EXPECT_EQ(ClosestName("timeout", {}), std::nullopt);
}

TEST(ClosestName, PrefersTheNearestThenTheFirst) {
  EXPECT_EQ(ClosestName("store", kKnown), "store");  // exact
  EXPECT_EQ(ClosestName("stor", {"story", "store"}), "story");  // a tie: the first
  EXPECT_EQ(ClosestName("sandbax", {"sandbox", "sandbag"}), "sandbox");
}

TEST(FirstUnknownLongOption, SkipsKnownOptionsValuesAndWhatFollowsDashDash) {
  EXPECT_EQ(FirstUnknownLongOption({"--session", "s", "--timout=5", "1"}, kKnown), "timout");
  EXPECT_EQ(FirstUnknownLongOption({"--session=s", "--json", "1"}, kKnown), std::nullopt);
  EXPECT_EQ(FirstUnknownLongOption({"-s", "s", "--", "--timout"}, kKnown), std::nullopt);
  EXPECT_EQ(FirstUnknownLongOption({"--", "x"}, kKnown), std::nullopt);
  EXPECT_EQ(FirstUnknownLongOption({"--"}, kKnown), std::nullopt);
}

}  // namespace
}  // namespace dolsot::cli
