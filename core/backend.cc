// Shared validation of run requests.
#include "core/backend.h"

#include "core/session_id.h"

namespace dolsot {

Status ValidateRunRequest(std::string_view session_id, std::string_view code) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(session_id));
  bool blank = true;
  for (char c : code) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
      blank = false;
      break;
    }
  }
  if (blank) return Status(ErrorCode::kInvalidSession, "code is empty: nothing to run");
  return Status::Ok();
}

}  // namespace dolsot
