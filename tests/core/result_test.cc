// Result's pre-joined text and banners.
#include "core/result.h"

#include <gtest/gtest.h>

#include "core/bounded_text.h"

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

TEST(ResultTest, TextWithinMaxTextKeepsEveryPartsEndsAndSaysWhatWasCut) {
  Result r;
  r.stdout_text = "first line\n" + std::string(100000, 'o') + "\nlast line\n";
  r.value = "'" + std::string(3000, 'v') + "'";
  r.error = "ValueError: short";
  r.held = {"x"};
  r.max_text = 2000;
  const std::string text = r.Text();
  EXPECT_LE(CountCodePoints(text), 2000u) << text;
  EXPECT_EQ(text.rfind("first line\n", 0), 0u) << text;
  EXPECT_NE(text.find("last line"), std::string::npos) << "the tail of the output stays";
  EXPECT_NE(text.find("ValueError: short"), std::string::npos) << "a small part stays whole";
  EXPECT_NE(text.find("session now holds: x"), std::string::npos);
  EXPECT_NE(text.find("vvv'"), std::string::npos) << "the value keeps its tail too";
  const std::size_t note = text.find("[text cut to 2000 characters (stdout, value)");
  ASSERT_NE(note, std::string::npos) << text;
  EXPECT_NE(text.find("print(x[:50])", note), std::string::npos);
  EXPECT_NE(text.find("len(x)", note), std::string::npos);
  // Engine prose: the note and each part's cut line, under 400 characters.
  std::size_t prose = text.size() - note;
  for (std::size_t at = text.find("\n[... "); at != std::string::npos; at = text.find("\n[... ", at + 1)) {
    prose += text.find("]\n", at) + 2 - at;
  }
  EXPECT_LT(prose, 400u);
}

TEST(ResultTest, TextThatFitsIsUncutAndZeroMeansNoCap) {
  Result r;
  r.stdout_text = std::string(50000, 'o');
  r.max_text = 0;
  EXPECT_EQ(r.Text(), r.stdout_text + "\nsession now holds: nothing");
  r.max_text = 60000;
  EXPECT_EQ(r.Text(), r.stdout_text + "\nsession now holds: nothing");
}

TEST(ResultTest, TextCountsTheFigures) {
  Result r;
  r.images = {"png1", "png2"};
  EXPECT_EQ(r.Text(), "session now holds: nothing\n[2 figures: PNG in Result.images]");
}

TEST(ResultTest, EmptySessionSaysNothing) {
  Result r;
  EXPECT_EQ(r.HeldBanner(), "session now holds: nothing");
  EXPECT_EQ(r.DroppedBanner(), "");
}

TEST(ResultTest, OutcomeIsSetOnceAndTheFirstObserverWins) {
  Result r;
  EXPECT_EQ(r.outcome(), Outcome::kOk) << "a cell that ran and returned";
  r.ok = false;
  EXPECT_EQ(r.outcome(), Outcome::kError) << "a cell that ran and raised";
  EXPECT_TRUE(r.SetOutcome(Outcome::kTimeout));
  EXPECT_FALSE(r.SetOutcome(Outcome::kCrashed)) << "the kill's own death cannot reclassify it";
  EXPECT_EQ(r.outcome(), Outcome::kTimeout);
}

TEST(ResultTest, FailureCarriesItsOutcomeAndNames) {
  Result r = Result::Failure(Outcome::kRejected, kExitFailure, "no", {"x"});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.outcome(), Outcome::kRejected);
  EXPECT_EQ(r.exit_code, kExitFailure);
  EXPECT_EQ(r.error, "no");
  EXPECT_EQ(r.held, std::vector<std::string>{"x"});
  EXPECT_STREQ(OutcomeName(Outcome::kWorkerLost), "worker_lost");
}

}  // namespace
}  // namespace dolsot
