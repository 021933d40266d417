// Backend: the one interface both backends (Repl, InProcessSession) implement.
// The CLI and the bindings know nothing else about a backend.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/session_info.h"
#include "core/status.h"

namespace dolsot {

struct RunOptions {
  std::optional<double> timeout_seconds;  // nullopt: the backend's timeout
};

// Thread safety: every method may be called from any thread. Calls on
// different sessions may run in parallel; calls on one session are served in
// arrival order (or refused with kBusy where a backend documents it).
// Errors: a caller mistake (bad session id, empty code) is a non-OK Status
// returned before any code runs. A failure of the user's code is not an
// error: it is an OK StatusOr holding a Result with ok == false.
class Backend {
 public:
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  virtual ~Backend() = default;

  virtual StatusOr<Result> Run(std::string_view session_id, std::string_view code,
                               const RunOptions& options) = 0;
  // Sessions this backend knows (live or stored).
  virtual StatusOr<std::vector<SessionInfo>> Sessions() = 0;
  // Forgets one session, or every one with "all"; returns how many.
  virtual StatusOr<int> Reset(std::string_view session_id_or_all) = 0;
  // Releases every resource (flushing pending checkpoints). Idempotent.
  virtual Status Close() = 0;
};

// Checks a run request the same way in every backend: a valid session id and
// non-empty code.
Status ValidateRunRequest(std::string_view session_id, std::string_view code);

}  // namespace dolsot
