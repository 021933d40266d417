// The gate's fast path: a conservative pass over Python's tokens that proves,
// without a parse, that the policy has nothing to object to in a cell. Any
// doubt answers false and the cell takes the full path (parse + walk).
#pragma once

#include <string_view>

#include "sandbox/policy.h"

namespace dolsot::sandbox {

// True only when every token of `code` is provably harmless under `policy`:
// ASCII outside strings and comments, no name or attribute the rules deny, no
// import outside the allow-list, no binding of a builtin or toolbox alias at
// module level, no store into a toolbox or module, no global/nonlocal, no
// match/case/type statements, and a tree no deeper than policy.max_depth. It
// does not prove the cell is valid Python: a cell it accepts may still raise
// SyntaxError when CPython compiles it (before anything runs). `code` must
// have passed CheckSourceText (valid UTF-8, no NUL, no lone CR).
bool PrescanProvesAllowed(std::string_view code, const Policy& policy);

}  // namespace dolsot::sandbox
