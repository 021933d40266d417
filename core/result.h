// Result: what one cell returns, identical for every backend.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dolsot {

// Exit codes a Result can carry (besides a toolbox exception's own int code).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitTimeout = 124;

struct Result {
  bool ok = true;
  std::optional<std::string> value;  // bounded repr of the trailing expression
  std::string stdout_text;           // what the cell printed (capped at the source)
  std::optional<std::string> error;  // traceback / error message, or nothing
  int exit_code = kExitOk;
  std::vector<std::string> held;     // names now in the session (no dunders)
  std::vector<std::string> dropped;  // names that could not be persisted

  // stdout + value + error + the held-names banner, joined for an agent.
  std::string Text() const;
  // "session now holds: a, b, c" (or "session now holds: nothing").
  std::string HeldBanner() const;
  // "not persisted (kept live in this process only): x, y", or "" when none.
  std::string DroppedBanner() const;
};

}  // namespace dolsot
