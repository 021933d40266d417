// Where an expression sits in the tree, for rules that allow a value only where
// it cannot be kept or handed on: a call's callee, the class argument of
// isinstance/issubclass, an argument of print/str/repr/len/ascii, an f-string
// field, an operand of `is`, the object of an attribute read, a truth test, a
// comparison, an expression statement.
#pragma once

#include <tree_sitter/api.h>

#include <cstdint>

#include "sandbox/python_grammar.h"

namespace dolsot::sandbox {

enum class UsePosition : std::uint8_t {
  kOther,            // kept, passed on, returned, stored, subscripted, ...
  kCallee,           // `X(...)`
  kArgument,         // a positional argument of `f(..., X, ...)` (or inside a tuple that is
                     // one: `isinstance(v, (X, Y))`): `other` is the callee `f`
  kInterpolation,    // `f"{X}"`, with any conversion or format spec
  kIdentity,         // an operand of a comparison whose operators are all `is` / `is not`
  kEquality,         // one of the two operands of `==` / `!=`: `other` is the other operand
  kAttributeObject,  // `X.attr`: `other` is the attribute name
  kClassPattern,     // `case X(...)`: an isinstance check on the subject
  kComparison,       // an operand of any other comparison (`<`, `in`, chains)
  kTest,             // tested for truth only: the condition of if/elif/while/assert, of a
                     // conditional expression or a comprehension's `if`, the operand of
                     // `not`, or an operand of `and`/`or` that is itself tested
  kStatement,        // a whole expression statement: computed and dropped (or, as a cell's
                     // last line, shown as its repr)
};

struct Use {
  UsePosition position = UsePosition::kOther;
  TSNode other{};  // see UsePosition; null when it names nothing
  // kArgument: which positional argument, of how many; in a tuple literal there.
  std::uint32_t index = 0, count = 0;
  bool in_tuple = false;
  // kIdentity, kEquality, kComparison: every other operand is a literal (a
  // number, a string, True/False/None, or a tuple/list/set of those).
  bool literal_operands = false;
};

// Where `node` (an expression) is used, looking through parentheses and, when
// `through_subscripts`, through `node[...]` (an element of it is used there).
// kArgument is given only when the callee is a plain name (the caller decides
// whether that name is the builtin) and the call has no keyword or splat.
Use ClassifyUse(TSNode node, const PythonGrammar& grammar, bool through_subscripts);

}  // namespace dolsot::sandbox
