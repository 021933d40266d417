// The size of what a constant expression computes, for the `huge-constant`
// rule (docs/gate.md): powers, shifts, factorials and repeated literal
// sequences whose result the gate can bound from the literals alone. CPython
// computes them in C while it holds the GIL, so a deadline cannot stop them.
#pragma once

#include <tree_sitter/api.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "sandbox/node_text.h"
#include "sandbox/python_grammar.h"

namespace dolsot::sandbox {

// Over this many decimal digits an integer result is refused.
inline constexpr double kMaxConstantDigits = 1e6;
// Over this many items (characters, bytes, elements) a repeated literal sequence is refused.
inline constexpr double kMaxSequenceLength = 1e8;

// Folds the constant parts of a cell's expressions, each node once per cell.
// Literals, parentheses, unary and binary operators, `pow(a, b)` and
// `factorial(n)` / `comb(n, k)` / `perm(n, k)` (any callee spelled so) fold;
// names and everything else are unknown. A power or shift of an unknown
// value by a literal amount counts as if the value were 2.
class ConstantSizes {
 public:
  ConstantSizes(NodeText& text, const PythonGrammar& grammar) : text_(text), grammar_(grammar) {}

  // What is wrong with the result of `node` (a binary operator, an augmented
  // assignment or a call), or nullopt. Each problem is returned once, for the
  // innermost node that has it.
  std::optional<std::string> Check(TSNode node);

 private:
  struct Value {
    enum class Type : std::uint8_t { kUnknown, kInt, kFloat, kSequence };
    Type type = Type::kUnknown;
    bool exact = false;        // kInt: `value` holds it
    std::int64_t value = 0;
    double digits = 0;         // kInt: an upper bound on its decimal digits
    double length = 0;         // kSequence: how many items
  };

  Value Fold(TSNode root);
  Value FoldOne(TSNode node);  // its operands are folded already
  Value Binary(TSNode node, std::string_view op, const Value& left, const Value& right);
  Value Call(TSNode node);
  Value Augmented(TSNode node);
  Value Over(TSNode node, std::string message);
  const Value& Memo(TSNode node) const;

  NodeText& text_;
  const PythonGrammar& grammar_;
  std::unordered_map<const void*, Value> memo_;
  std::unordered_map<const void*, std::string> problems_;
};

}  // namespace dolsot::sandbox
