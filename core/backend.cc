// Backend's optional operations, and the shared validation of run requests.
#include "core/backend.h"

#include "core/session_id.h"

namespace dolsot {

Status Backend::Branch(std::string_view source_id, std::string_view new_id) {
  return Status(ErrorCode::kUnimplemented,
                "branch is not supported by this backend (capabilities().branch is false)");
}

StatusOr<PyObject*> Backend::Namespace(std::string_view session_id) {
  return Status(ErrorCode::kUnimplemented,
                "namespace is not supported by this backend: its sessions live in other "
                "processes (capabilities().live_objects is false)");
}

Status Backend::Release(std::string_view session_id) {
  return Status(ErrorCode::kUnimplemented,
                "release is not supported by this backend: its sessions live only in it "
                "(capabilities().durable is false)");
}

std::vector<std::string> Backend::LiveSessions() { return {}; }

StatusOr<SandboxReport> Backend::SandboxStatus() {
  return Status(ErrorCode::kUnimplemented,
                "a sandbox report is not available from this backend: its cells run in no "
                "kernel-enforced walls (capabilities().sandbox is false)");
}

Status ValidateRunRequest(std::string_view session_id, std::string_view code,
                          const RunOptions& options) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(session_id));
  bool blank = true;
  for (char c : code) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
      blank = false;
      break;
    }
  }
  if (blank) return Status(ErrorCode::kInvalidSession, "code is empty: nothing to run");
  return ValidateCellInputs(options.tools, options.variables);
}

}  // namespace dolsot
