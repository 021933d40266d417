// Names of error codes and Status formatting.
#include "core/status.h"

namespace dolsot {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kInvalidSession: return "invalid session";
    case ErrorCode::kInvalidToolbox: return "invalid toolbox";
    case ErrorCode::kConfig: return "configuration error";
    case ErrorCode::kIo: return "i/o error";
    case ErrorCode::kPermission: return "permission error";
    case ErrorCode::kCorrupt: return "corrupt data";
    case ErrorCode::kBusy: return "busy";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kUnimplemented: return "unsupported";
    case ErrorCode::kWeakerWalls: return "weaker walls";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown error";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(ErrorCodeName(code_)) + ": " + message_;
}

}  // namespace dolsot
