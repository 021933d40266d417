// Status and StatusOr behave as values.
#include "core/status.h"

#include <gtest/gtest.h>

namespace dolsot {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "ok");
}

TEST(StatusTest, CarriesCodeAndMessage) {
  Status s(ErrorCode::kConfig, "DOLSOT_TIMEOUT='abc' is not a number of seconds");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kConfig);
  EXPECT_EQ(s.ToString(), "configuration error: DOLSOT_TIMEOUT='abc' is not a number of seconds");
}

TEST(StatusOrTest, HoldsValueOrError) {
  StatusOr<int> good = 3;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  StatusOr<int> bad = IoError("disk gone");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kIo);
}

Status FailsThenNeverReached(bool* reached) {
  DOLSOT_RETURN_IF_ERROR(CorruptError("torn frame"));
  *reached = true;
  return Status::Ok();
}

TEST(StatusTest, ReturnIfErrorPropagates) {
  bool reached = false;
  Status s = FailsThenNeverReached(&reached);
  EXPECT_EQ(s.code(), ErrorCode::kCorrupt);
  EXPECT_FALSE(reached);
}

}  // namespace
}  // namespace dolsot
