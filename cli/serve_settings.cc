// The server's settings from the environment (see serve_settings.h).
#include "cli/serve_settings.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace dolsot::cli {

StatusOr<bool> ServeEnabled(const EnvLookup& env, bool no_serve_flag) {
  if (no_serve_flag) return false;
  if (auto value = env("DOLSOT_SERVE"); value && !value->empty()) {
    StatusOr<bool> on = ParseFlag("DOLSOT_SERVE", *value);
    if (!on.ok() || !*on) return on;
  }
  DOLSOT_RETURN_IF_ERROR(ServeIdleSeconds(env).status());
  DOLSOT_RETURN_IF_ERROR(ServeMaxProfiles(env).status());
  return true;
}

StatusOr<double> ServeIdleSeconds(const EnvLookup& env) {
  auto value = env("DOLSOT_SERVE_IDLE");
  if (!value || value->empty()) return kDefaultServeIdleSeconds;
  char* end = nullptr;
  errno = 0;
  double seconds = std::strtod(value->c_str(), &end);
  if (errno != 0 || end == value->c_str() || *end != '\0' || !std::isfinite(seconds) ||
      seconds <= 0 || seconds > 365.0 * 24 * 3600) {
    return Status(ErrorCode::kConfig,
                  "DOLSOT_SERVE_IDLE must be a positive number of seconds, got '" + *value + "'");
  }
  return seconds;
}

StatusOr<int> ServeMaxProfiles(const EnvLookup& env) {
  auto value = env("DOLSOT_SERVE_PROFILES");
  if (!value || value->empty()) return kDefaultServeProfiles;
  char* end = nullptr;
  errno = 0;
  const long count = std::strtol(value->c_str(), &end, 10);
  if (errno != 0 || end == value->c_str() || *end != '\0' || count < 1 || count > 1024) {
    return Status(ErrorCode::kConfig,
                  "DOLSOT_SERVE_PROFILES must be a number of profiles from 1 to 1024, got '" +
                      *value + "'");
  }
  return static_cast<int>(count);
}

}  // namespace dolsot::cli
