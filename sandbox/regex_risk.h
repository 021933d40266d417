// Regular expressions whose backtracking can take exponential time in
// CPython's re, which holds the GIL while it matches (docs/gate.md,
// `slow-pattern`): a repeated group that contains a repeated item.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace dolsot::sandbox {

// The offset of the first group of `pattern` (a decoded literal) that is
// repeated and holds a repeated item, one of them unbounded: `(a+)+`,
// `(x*)*y`, `(\w+\s?)*`, `(.*a){20}`, `((a+)b)+`. A possessive quantifier
// (`a++`, 3.11+) or an atomic group (`(?>...)`) cannot backtrack and does not
// count. Overlapping alternatives (`(a|a)*`, `(a|aa)+`) are not looked at.
// Verbose patterns are also read with whitespace and `#` comments removed.
std::optional<std::size_t> FindNestedQuantifier(std::string_view pattern);

}  // namespace dolsot::sandbox
