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
  // Appends `bytes` to the blob under `sid` (a checkpoint's journal frame,
  // docs/checkpoint-format.md "Journal"): Load then returns the blob and
  // everything appended since it was saved, in order. kInvalidSession when `sid`
  // has no blob. A store that cannot append returns kUnimplemented (the
  // default), and its callers save whole blobs instead. A crash during an
  // append may leave part of `bytes` behind (the reader of the journal
  // detects it); a failed append must not be retried: the caller saves a
  // whole blob next.
  virtual Status Append(std::string_view sid, std::string_view bytes) {
    (void)sid;
    (void)bytes;
    return Status(ErrorCode::kUnimplemented, "this session store cannot append");
  }
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
