// The names a stored checkpoint holds, read without restoring it: the value
// and module entries of its base blob (or of its last delta frame and the
// base's values that frame kept), then the names its binding frames bound
// (docs/checkpoint-format.md). What `dolsot --names` prints when no server
// holds the session live: a name the session could not save (a socket, a
// thread) is not in it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/command_context.h"
#include "core/session_store.h"
#include "core/status.h"

namespace dolsot::cli {

// The sorted names of `stored` (what SessionStore::Load returned); kCorrupt
// naming the damage when its base cannot be parsed.
StatusOr<std::vector<std::string>> CheckpointNames(std::string_view stored);

// Session `session_id`'s names in `store`: kCheckpoint, or kNone when it
// holds no such session.
StatusOr<SessionNames> NamesInStore(SessionStore& store, const std::string& session_id);

// The same in the FileStore the configuration names (direct mode).
StatusOr<SessionNames> StoredSessionNames(const std::string& session_id);

}  // namespace dolsot::cli
