// The fast path's side of the rules about what an in-process run() cannot
// stop or will run later (slow-pattern, huge-constant, deferred-code; see
// cell_checker_deadline.cc): a token-level proof that none of them can fire.
#pragma once

#include <vector>

#include "sandbox/prescan_lexer.h"

namespace dolsot::sandbox::prescan {

// True when no string literal looks like a catastrophic regex, every power,
// shift and literal repetition is provably small, and no yield/await/async
// shares the cell with a try or with statement. False means "not proven":
// the full path decides.
bool DeadlineRulesCannotFire(const std::vector<Token>& tokens);

}  // namespace dolsot::sandbox::prescan
