// "Did you mean" for the CLI (see did_you_mean.h).
#include "cli/did_you_mean.h"

#include <algorithm>
#include <cstddef>

namespace dolsot::cli {
namespace {

// Optimal string alignment distance (Damerau-Levenshtein without edits of a
// swapped pair), cut off at `limit` + 1.
std::size_t EditDistance(std::string_view a, std::string_view b, std::size_t limit) {
  const std::size_t n = a.size(), m = b.size();
  if ((n > m ? n - m : m - n) > limit) return limit + 1;
  std::vector<std::size_t> before(m + 1), previous(m + 1), current(m + 1);
  for (std::size_t j = 0; j <= m; ++j) previous[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    before.swap(previous);
    previous.swap(current);
  }
  return std::min(previous[m], limit + 1);
}

}  // namespace

std::optional<std::string> ClosestName(std::string_view typed,
                                       const std::vector<std::string>& known) {
  constexpr std::size_t kMaxEdits = 2;
  std::optional<std::string> best;
  std::size_t best_distance = kMaxEdits + 1;
  for (const std::string& name : known) {
    const std::size_t distance = EditDistance(typed, name, kMaxEdits);
    if (distance < best_distance && distance * 2 < typed.size()) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

std::optional<std::string> FirstUnknownLongOption(const std::vector<std::string_view>& args,
                                                  const std::vector<std::string>& known) {
  for (std::string_view arg : args) {
    if (arg == "--") break;
    if (arg.size() <= 2 || arg.substr(0, 2) != "--") continue;
    std::string_view name = arg.substr(2, arg.find('=') == std::string_view::npos
                                              ? std::string_view::npos
                                              : arg.find('=') - 2);
    if (std::find(known.begin(), known.end(), name) == known.end()) return std::string(name);
  }
  return std::nullopt;
}

}  // namespace dolsot::cli
