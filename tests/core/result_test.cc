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
