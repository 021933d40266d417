// Configuration: explicit argument > environment variable > default, always.
// A malformed environment value is an error naming the variable, never
// silently the default.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "core/status.h"

namespace dolsot {

inline constexpr double kDefaultTimeoutSeconds = 20.0;
inline constexpr double kDefaultCheckpointDelaySeconds = 1.0;
inline constexpr int kDefaultTtlDays = 7;
inline constexpr std::size_t kDefaultMaxOutput = 100000;
// A value's repr (embedded/bounded_repr.h) and Result::Text() as a whole.
inline constexpr std::size_t kDefaultMaxRepr = 4000;
inline constexpr std::size_t kDefaultMaxText = 20000;

// Settings as a caller passes them; unset fields fall back to the environment.
struct ConfigOverrides {
  std::optional<std::string> cache_dir;
  std::optional<int> ttl_days;
  std::optional<double> timeout_seconds;
  std::optional<std::size_t> max_output;  // 0 = no cap
  std::optional<std::size_t> max_repr;    // 0 = no cap
  std::optional<std::size_t> max_text;    // 0 = no cap
  std::optional<bool> typecheck;
  std::optional<std::string> ty_bin;
  std::optional<double> checkpoint_delay_seconds;
};

struct Config {
  std::string cache_dir;  // FileStore's directory
  int ttl_days = kDefaultTtlDays;  // 0 disables reaping
  double timeout_seconds = kDefaultTimeoutSeconds;
  std::size_t max_output = kDefaultMaxOutput;  // stdout, and the value too; 0 = no cap
  std::size_t max_repr = kDefaultMaxRepr;      // the value's repr; 0 = no cap
  std::size_t max_text = kDefaultMaxText;      // Result::Text() as a whole; 0 = no cap
  bool typecheck = true;
  std::string ty_bin = "ty";
  // A Repl with async checkpoints: how long the checkpoint of a binding
  // cell (embedded/read_only_cell.h) may wait, for the cells after it to
  // share it; what a crash of the host can lose. 0: written at once.
  double checkpoint_delay_seconds = kDefaultCheckpointDelaySeconds;
};

// Reads one environment variable; returns nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
// The process environment (getenv).
EnvLookup ProcessEnvironment();

// {tempdir}/dolsot-{uid}/sessions, tempdir from TMPDIR or /tmp.
std::string DefaultCacheDir(const EnvLookup& env);

// Resolves every setting. Errors (kConfig) name the variable or argument.
StatusOr<Config> ResolveConfig(const ConfigOverrides& overrides, const EnvLookup& env);
inline StatusOr<Config> ResolveConfig(const ConfigOverrides& overrides) {
  return ResolveConfig(overrides, ProcessEnvironment());
}

// A DOLSOT_* flag's value: 1/true/yes/on or 0/false/no/off (any case,
// spaces trimmed); anything else is a kConfig error naming `name`.
StatusOr<bool> ParseFlag(const char* name, const std::string& raw);

// Validators shared with explicit arguments (bindings, CLI).
Status CheckTimeout(double seconds, const char* what);
Status CheckTtlDays(long long days, const char* what);
Status CheckCheckpointDelay(double seconds, const char* what);

}  // namespace dolsot
