// Configuration resolution and validation.
#include "core/config.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace dolsot {
namespace {

Status ConfigError(std::string message) { return {ErrorCode::kConfig, std::move(message)}; }

std::string Quote(const std::string& raw) {
  std::string out = "'";
  for (unsigned char c : raw) {
    if (c < 0x20 || c == 0x7f) {
      out += '?';
    } else {
      out += static_cast<char>(c);
    }
    if (out.size() > 64) {
      out += "...";
      break;
    }
  }
  return out + "'";
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

StatusOr<long long> ParseInteger(const char* name, const std::string& raw) {
  std::string text = Trim(raw);
  if (text.empty()) return ConfigError(std::string(name) + " is empty; expected an integer");
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') {
    return ConfigError(std::string(name) + "=" + Quote(raw) + " is not an integer");
  }
  return value;
}

StatusOr<double> ParseSeconds(const char* name, const std::string& raw) {
  std::string text = Trim(raw);
  if (text.empty()) return ConfigError(std::string(name) + " is empty; expected seconds");
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0') {
    return ConfigError(std::string(name) + "=" + Quote(raw) + " is not a number of seconds");
  }
  return value;
}


// A count of characters (0 = no cap): the explicit value, else the
// variable `name`, else `out` as it is (the default).
Status ResolveCharacters(const std::optional<std::size_t>& explicit_value, const char* name,
                         const EnvLookup& env, std::size_t& out) {
  if (explicit_value) {
    out = *explicit_value;
    return Status::Ok();
  }
  std::optional<std::string> raw = env(name);
  if (!raw) return Status::Ok();
  StatusOr<long long> n = ParseInteger(name, *raw);
  if (!n.ok()) return n.status();
  if (*n < 0) {
    return ConfigError(std::string(name) + " must be 0 (no cap) or a positive number of characters");
  }
  out = static_cast<std::size_t>(*n);
  return Status::Ok();
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

std::string DefaultCacheDir(const EnvLookup& env) {
  std::string tmp = "/tmp";
  if (auto t = env("TMPDIR"); t && !t->empty() && (*t)[0] == '/') tmp = *t;
  while (tmp.size() > 1 && tmp.back() == '/') tmp.pop_back();
  return tmp + "/dolsot-" + std::to_string(::getuid()) + "/sessions";
}

StatusOr<bool> ParseFlag(const char* name, const std::string& raw) {
  std::string t = Trim(raw);
  for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return false;
  return ConfigError(std::string(name) + "=" + Quote(raw) +
                     " is not a flag; use 1 or 0 (true/false, yes/no, on/off)");
}

Status CheckTimeout(double seconds, const char* what) {
  if (!std::isfinite(seconds) || seconds <= 0) {
    return ConfigError(std::string(what) + " must be a positive number of seconds, got " +
                       std::to_string(seconds));
  }
  if (seconds > 365.0 * 24 * 3600) {
    return ConfigError(std::string(what) + " is longer than a year");
  }
  return Status::Ok();
}

Status CheckTtlDays(long long days, const char* what) {
  if (days < 0) {
    return ConfigError(std::string(what) + " must be 0 (never reap) or a positive number of days, got " +
                       std::to_string(days));
  }
  if (days > 100000) return ConfigError(std::string(what) + " is absurdly large: " + std::to_string(days));
  return Status::Ok();
}

Status CheckCheckpointDelay(double seconds, const char* what) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 3600) {
    return ConfigError(std::string(what) + " must be from 0 to 3600 seconds, got " +
                       std::to_string(seconds));
  }
  return Status::Ok();
}

StatusOr<Config> ResolveConfig(const ConfigOverrides& o, const EnvLookup& env) {
  Config c;

  if (o.cache_dir) {
    if (o.cache_dir->empty()) return ConfigError("cache_dir is empty");
    c.cache_dir = *o.cache_dir;
  } else if (auto v = env("DOLSOT_CACHE_DIR"); v && !v->empty()) {
    c.cache_dir = *v;
  } else {
    c.cache_dir = DefaultCacheDir(env);
  }
  if (c.cache_dir.find('\0') != std::string::npos) return ConfigError("cache directory holds a NUL byte");

  if (o.ttl_days) {
    DOLSOT_RETURN_IF_ERROR(CheckTtlDays(*o.ttl_days, "ttl_days"));
    c.ttl_days = *o.ttl_days;
  } else if (auto v = env("DOLSOT_SESSION_TTL_DAYS")) {
    auto days = ParseInteger("DOLSOT_SESSION_TTL_DAYS", *v);
    if (!days.ok()) return days.status();
    DOLSOT_RETURN_IF_ERROR(CheckTtlDays(*days, "DOLSOT_SESSION_TTL_DAYS"));
    c.ttl_days = static_cast<int>(*days);
  }

  if (o.timeout_seconds) {
    DOLSOT_RETURN_IF_ERROR(CheckTimeout(*o.timeout_seconds, "timeout"));
    c.timeout_seconds = *o.timeout_seconds;
  } else if (auto v = env("DOLSOT_TIMEOUT")) {
    auto secs = ParseSeconds("DOLSOT_TIMEOUT", *v);
    if (!secs.ok()) return secs.status();
    DOLSOT_RETURN_IF_ERROR(CheckTimeout(*secs, "DOLSOT_TIMEOUT"));
    c.timeout_seconds = *secs;
  }

  DOLSOT_RETURN_IF_ERROR(ResolveCharacters(o.max_output, "DOLSOT_MAX_OUTPUT", env, c.max_output));
  DOLSOT_RETURN_IF_ERROR(ResolveCharacters(o.max_repr, "DOLSOT_MAX_REPR", env, c.max_repr));
  DOLSOT_RETURN_IF_ERROR(ResolveCharacters(o.max_text, "DOLSOT_MAX_TEXT", env, c.max_text));

  if (o.typecheck) {
    c.typecheck = *o.typecheck;
  } else if (auto v = env("DOLSOT_TYPECHECK")) {
    auto f = ParseFlag("DOLSOT_TYPECHECK", *v);
    if (!f.ok()) return f.status();
    c.typecheck = *f;
  }

  if (o.checkpoint_delay_seconds) {
    DOLSOT_RETURN_IF_ERROR(CheckCheckpointDelay(*o.checkpoint_delay_seconds, "checkpoint_delay"));
    c.checkpoint_delay_seconds = *o.checkpoint_delay_seconds;
  } else if (auto v = env("DOLSOT_CHECKPOINT_DELAY")) {
    auto secs = ParseSeconds("DOLSOT_CHECKPOINT_DELAY", *v);
    if (!secs.ok()) return secs.status();
    DOLSOT_RETURN_IF_ERROR(CheckCheckpointDelay(*secs, "DOLSOT_CHECKPOINT_DELAY"));
    c.checkpoint_delay_seconds = *secs;
  }

  if (o.ty_bin) {
    if (o.ty_bin->empty()) return ConfigError("ty_bin is empty");
    c.ty_bin = *o.ty_bin;
  } else if (auto v = env("DOLSOT_TY_BIN")) {
    if (v->empty()) return ConfigError("DOLSOT_TY_BIN is set but empty");
    c.ty_bin = *v;
  }
  return c;
}

}  // namespace dolsot
