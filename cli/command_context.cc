// Status -> exit code mapping and error reporting for every command.
#include "cli/command_context.h"

#include <chrono>

#include "core/exit_codes.h"

namespace dolsot::cli {

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kOk:
      return kExitOk;
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kInvalidSession:
    case ErrorCode::kInvalidToolbox:
    case ErrorCode::kConfig:
    case ErrorCode::kPermission:
      return kExitUsage;
    case ErrorCode::kTimeout:
      return kExitTimeout;
    case ErrorCode::kUnimplemented:
    case ErrorCode::kWeakerWalls:
      return kExitUsage;
    case ErrorCode::kIo:
    case ErrorCode::kCorrupt:
    case ErrorCode::kBusy:
    case ErrorCode::kUnavailable:
    case ErrorCode::kInternal:
      return kExitFailure;
  }
  return kExitFailure;
}

int ReportError(std::ostream& err, const Status& status) {
  err << "dolsot: error: " << status.message();
  if (status.message().empty() || status.message().back() != '\n') err << '\n';
  err.flush();
  return ExitCodeFor(status);
}

int ReportSetupError(std::ostream& err, const Status& status) {
  ReportError(err, status);
  return kExitUsage;
}

double UnixNow() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace dolsot::cli
