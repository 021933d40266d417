// Session id validation.
#include "core/session_id.h"

#include <cstdio>
#include <string>

namespace dolsot {
namespace {

bool IsAllowedChar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-';
}

Status Invalid(std::string message) {
  return Status(ErrorCode::kInvalidSession, std::move(message));
}

Status CheckShape(std::string_view id) {
  if (id.empty()) return Invalid("session id is empty");
  if (id.size() > kMaxSessionIdLength) {
    return Invalid("session id is " + std::to_string(id.size()) +
                   " characters long; the limit is " + std::to_string(kMaxSessionIdLength));
  }
  for (size_t i = 0; i < id.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(id[i]);
    if (!IsAllowedChar(c)) {
      char buf[64];
      if (c < 0x20 || c >= 0x7f) {
        std::snprintf(buf, sizeof buf, "byte 0x%02x at position %zu", c, i);
      } else {
        std::snprintf(buf, sizeof buf, "character '%c' at position %zu", c, i);
      }
      return Invalid(std::string("session id holds ") + buf +
                     "; allowed are letters, digits, '.', '_' and '-'");
    }
  }
  if (id.front() == '.' || id.front() == '-') {
    return Invalid("session id may not start with '.' or '-'");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateSessionId(std::string_view id) {
  DOLSOT_RETURN_IF_ERROR(CheckShape(id));
  if (id == kAllSessions) return Invalid("session id \"all\" is reserved for reset");
  return Status::Ok();
}

Status ValidateResetTarget(std::string_view id) {
  if (id == kAllSessions) return Status::Ok();
  return CheckShape(id);
}

}  // namespace dolsot
