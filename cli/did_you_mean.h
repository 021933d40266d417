// The closest known name to a mistyped one, for "did you mean" in the CLI's
// usage errors (`--timout` -> `--timeout`).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dolsot::cli {

// The name in `known` nearest to `typed` by edit distance (insertions,
// deletions, substitutions and swaps of two neighbours, each 1), when it is
// near enough to be a typo: at most 2 edits, and fewer than half of `typed`'s
// length. Ties go to the earlier name. nullopt when none is.
std::optional<std::string> ClosestName(std::string_view typed,
                                       const std::vector<std::string>& known);

// The first word of `args` that starts with "--" (before a bare "--") and
// whose name (up to an '=') is not in `known`; nullopt when there is none.
std::optional<std::string> FirstUnknownLongOption(const std::vector<std::string_view>& args,
                                                  const std::vector<std::string>& known);

}  // namespace dolsot::cli
