// SessionStore: where session checkpoints live. Bytes only: a store never
// deserializes a session, and dolsot never asks it to.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/session_info.h"
#include "core/status.h"

namespace dolsot {

// Thread safety: implementations must allow concurrent calls from several
// threads (and, for FileStore, several processes sharing one directory).
// Callers validate session ids (ValidateSessionId) before calling.
class SessionStore {
 public:
  virtual ~SessionStore() = default;

  // The blob saved under `sid`, or nullopt when there is none.
  virtual StatusOr<std::optional<std::string>> Load(std::string_view sid) = 0;
  // Replaces the blob under `sid` atomically.
  virtual Status Save(std::string_view sid, std::string_view blob) = 0;
  // Deletes `sid` ("all": every session); returns how many were deleted.
  virtual StatusOr<int> Delete(std::string_view sid) = 0;
  // Every stored session.
  virtual StatusOr<std::vector<SessionInfo>> List() = 0;
  // The session `sid` leaves this host (evicted, reset, or its backend
  // closed): a store that leases sessions to one host at a time (RedisStore)
  // gives the lease up here. Optional; the default does nothing.
  virtual Status Release(std::string_view sid) {
    (void)sid;
    return Status::Ok();
  }
};

}  // namespace dolsot
