// Session ids: the one safe alphabet every backend and store accepts.
//
// A session id is 1..128 characters from [A-Za-z0-9._-], does not start with
// '.' or '-', and is not "all" (reserved for reset). Such an id is a safe file
// name on every platform: it cannot escape a directory, hold a separator, a
// control character or a NUL, or be mistaken for an option.
#pragma once

#include <string_view>

#include "core/status.h"

namespace dolsot {

inline constexpr std::size_t kMaxSessionIdLength = 128;
inline constexpr std::string_view kAllSessions = "all";

// OK when `id` names a session (for run, branch, load, save).
Status ValidateSessionId(std::string_view id);
// Like ValidateSessionId, but also accepts "all" (for reset / delete).
Status ValidateResetTarget(std::string_view id);

}  // namespace dolsot
