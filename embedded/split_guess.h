// GuessSplit: where a cell's last logical line starts and whether it is surely
// a statement, likely an expression, or unclear: RunCell's fast split.
#pragma once

#include <cstddef>
#include <string_view>

namespace dolsot {

// The fast split: a small scanner finds where the cell's last logical line
// starts and whether it is surely a statement, likely an expression, or
// unclear. "Likely" is then proven by compiling both parts; anything unclear
// or unproven takes the AST path, which is always right.

enum class LastLine { kStatement, kExpression, kUnclear };

struct SplitGuess {
  LastLine kind = LastLine::kUnclear;
  std::size_t offset = 0;  // where the last logical line starts
  bool has_prefix = false;  // a logical line comes before it
};

// The guess for `code`: kUnclear when this scanner cannot follow it (a
// continuation starting a line, an unterminated string, unbalanced
// brackets, an f-string with nested quotes on Python 3.12+, ...).
SplitGuess GuessSplit(std::string_view code);

}  // namespace dolsot
