// Text tables, human sizes and human ages.
#include "cli/table.h"

#include <gtest/gtest.h>

namespace dolsot::cli {
namespace {

TEST(HumanSizeTest, BytesBelowOneKilobyte) {
  EXPECT_EQ(HumanSize(0), "0 B");
  EXPECT_EQ(HumanSize(999), "999 B");
}

TEST(HumanSizeTest, DecimalUnitsWithOneDecimal) {
  EXPECT_EQ(HumanSize(1000), "1.0 kB");
  EXPECT_EQ(HumanSize(1234), "1.2 kB");
  EXPECT_EQ(HumanSize(1200000), "1.2 MB");
  EXPECT_EQ(HumanSize(3400000000ULL), "3.4 GB");
}

TEST(HumanSizeTest, RoundsUpIntoTheNextUnitRatherThanPrinting1000) {
  EXPECT_EQ(HumanSize(999960), "1.0 MB");
}

TEST(HumanAgeTest, Ranges) {
  const double now = 1'000'000;
  EXPECT_EQ(HumanAge(now, now), "just now");
  EXPECT_EQ(HumanAge(now + 30, now), "just now");  // clock skew
  EXPECT_EQ(HumanAge(now - 42, now), "42 s ago");
  EXPECT_EQ(HumanAge(now - 180, now), "3 min ago");
  EXPECT_EQ(HumanAge(now - 5 * 3600, now), "5 h ago");
  EXPECT_EQ(HumanAge(now - 86400, now), "1 day ago");
  EXPECT_EQ(HumanAge(now - 12 * 86400, now), "12 days ago");
}

TEST(FormatTableTest, AlignsColumnsWithoutTrailingSpaces) {
  const std::string table = FormatTable({{"NAME", Align::kLeft}, {"SIZE", Align::kRight}},
                                        {{"a", "1 B"}, {"longer-name", "12.5 kB"}});
  EXPECT_EQ(table,
            "NAME            SIZE\n"
            "a                1 B\n"
            "longer-name  12.5 kB\n");
}

TEST(FormatTableTest, ShortRowsArePadded) {
  EXPECT_EQ(FormatTable({{"A", Align::kLeft}, {"B", Align::kLeft}}, {{"x"}}), "A  B\nx\n");
}

TEST(SessionsTableTest, OneRowPerSession) {
  const double now = 2'000'000;
  EXPECT_EQ(SessionsTable({{"work", 1234, now - 180}, {"scratch", 10, now}}, now),
            "SESSION    SIZE  LAST USED\n"
            "work     1.2 kB  3 min ago\n"
            "scratch    10 B  just now\n");
}

}  // namespace
}  // namespace dolsot::cli
