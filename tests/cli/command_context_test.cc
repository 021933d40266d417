// Status -> exit code mapping and the `dolsot: error:` line.
#include "cli/command_context.h"

#include <gtest/gtest.h>

#include <sstream>

#include "core/exit_codes.h"

namespace dolsot::cli {
namespace {

TEST(ExitCodeForTest, CallerAndConfigurationMistakesAreUsageErrors) {
  for (ErrorCode code : {ErrorCode::kInvalidArgument, ErrorCode::kInvalidSession,
                         ErrorCode::kInvalidToolbox, ErrorCode::kConfig, ErrorCode::kPermission}) {
    EXPECT_EQ(ExitCodeFor(Status(code, "x")), kExitUsage) << ErrorCodeName(code);
  }
}

TEST(ExitCodeForTest, TimeoutIs124AndEngineFailuresAre1) {
  EXPECT_EQ(ExitCodeFor(Status(ErrorCode::kTimeout, "x")), kExitTimeout);
  for (ErrorCode code : {ErrorCode::kIo, ErrorCode::kCorrupt, ErrorCode::kBusy,
                         ErrorCode::kUnavailable, ErrorCode::kInternal}) {
    EXPECT_EQ(ExitCodeFor(Status(code, "x")), kExitFailure) << ErrorCodeName(code);
  }
}

TEST(ReportErrorTest, OneLinePrefixedWithTheProgramName) {
  std::ostringstream err;
  EXPECT_EQ(ReportError(err, Status(ErrorCode::kConfig, "DOLSOT_TIMEOUT='x' is bad")), kExitUsage);
  EXPECT_EQ(err.str(), "dolsot: error: DOLSOT_TIMEOUT='x' is bad\n");
}

TEST(ReportSetupErrorTest, AnythingWhileOpeningTheBackendIsAUsageError) {
  std::ostringstream err;
  EXPECT_EQ(ReportSetupError(err, Status(ErrorCode::kIo, "cannot create /x")), kExitUsage);
  EXPECT_EQ(err.str(), "dolsot: error: cannot create /x\n");
}

}  // namespace
}  // namespace dolsot::cli
