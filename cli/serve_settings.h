// The server's settings from the environment, read by the client before it
// starts or calls a server and by `dolsot serve` itself: a malformed value is
// an error naming the variable (exit 2), never the default or a silent fall
// back to direct mode.
#pragma once

#include "core/config.h"
#include "core/status.h"

namespace dolsot::cli {

// Whether CLI calls go through the server: DOLSOT_SERVE unset or empty, or a
// true flag (1/true/yes/on), and no --no-serve; false for a false flag
// (0/false/no/off). Any other value is a kConfig error. When the server is
// on, DOLSOT_SERVE_IDLE and DOLSOT_SERVE_PROFILES are checked too: the server
// this call may start reads them.
StatusOr<bool> ServeEnabled(const EnvLookup& env, bool no_serve_flag);

// The default idle time, seconds.
inline constexpr double kDefaultServeIdleSeconds = 600;

// DOLSOT_SERVE_IDLE (seconds, > 0), else the default. kConfig when malformed.
StatusOr<double> ServeIdleSeconds(const EnvLookup& env);

// The default number of profiles a server keeps.
inline constexpr int kDefaultServeProfiles = 8;

// DOLSOT_SERVE_PROFILES (1 to 1024), else the default. kConfig when malformed.
StatusOr<int> ServeMaxProfiles(const EnvLookup& env);

}  // namespace dolsot::cli
