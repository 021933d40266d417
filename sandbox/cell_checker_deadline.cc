// The gate's checks of what an in-process run() cannot stop or will run later
// (see cell_checker.h and docs/gate.md): literal regular expressions whose
// backtracking is exponential (slow-pattern), literal powers, shifts,
// factorials and repetitions too big to compute (huge-constant), both done in
// C while CPython holds the GIL; and a yield or await inside a try or with
// statement, whose cleanup runs when the generator or coroutine is collected,
// on whatever thread collects it (deferred-code).
#include <algorithm>
#include <array>

#include "sandbox/cell_checker.h"
#include "sandbox/regex_risk.h"
#include "sandbox/rules.h"
#include "sandbox/string_literal.h"

namespace dolsot::sandbox {
namespace {

// re's functions that take a pattern first (3.10's re.template included).
constexpr std::array<std::string_view, 10> kPatternFunctions = {
    "compile", "findall", "finditer", "fullmatch", "match", "search", "split", "sub", "subn",
    "template",
};

bool IsPatternFunction(std::string_view name) {
  return std::find(kPatternFunctions.begin(), kPatternFunctions.end(), name) !=
         kPatternFunctions.end();
}

bool HasAsyncKeyword(TSNode node) {
  for (uint32_t i = 0; i < ts_node_child_count(node); ++i) {
    TSNode child = ts_node_child(node, i);
    if (!ts_node_is_named(child) && std::string_view(ts_node_type(child)) == "async") return true;
  }
  return false;
}

}  // namespace

// A call of a regex function: `re.match(p, s)`, `r.compile(p)` (any object:
// the gate cannot see which one is re, and a literal that looks like a
// catastrophic pattern is one), `match(p, s)` after `from re import match`
// (decided at the end: the import may come later in the cell's text).
void CellChecker::CheckPatternCall(TSNode call, TSNode function, std::string_view callee) {
  NodeKind kind = grammar_.KindOf(function);
  if (kind != NodeKind::kIdentifier && kind != NodeKind::kAttribute) return;
  TSNode arguments = ts_node_child_by_field_id(call, grammar_.arguments);
  if (ts_node_is_null(arguments)) return;
  TSNode pattern{};
  for (uint32_t i = 0; i < ts_node_named_child_count(arguments); ++i) {
    TSNode argument = ts_node_named_child(arguments, i);
    NodeKind argument_kind = grammar_.KindOf(argument);
    if (argument_kind == NodeKind::kComment) continue;
    if (argument_kind == NodeKind::kKeywordArgument) {
      TSNode name = ts_node_child_by_field_id(argument, grammar_.name);
      if (!ts_node_is_null(name) && Name(name) == "pattern") {
        pattern = ts_node_child_by_field_id(argument, grammar_.value);
      }
      continue;
    }
    if (ts_node_is_null(pattern) && i == 0) pattern = argument;
  }
  while (!ts_node_is_null(pattern) &&
         grammar_.KindOf(pattern) == NodeKind::kParenthesizedExpression) {
    pattern = ts_node_named_child(pattern, 0);
  }
  if (ts_node_is_null(pattern)) return;
  NodeKind pattern_kind = grammar_.KindOf(pattern);
  bool literal = pattern_kind == NodeKind::kString || pattern_kind == NodeKind::kConcatenatedString;
  if (!literal && pattern_kind != NodeKind::kIdentifier) return;
  std::string by_name = literal ? std::string() : std::string(Name(pattern));
  TSNode where = literal ? pattern : call;
  if (kind == NodeKind::kIdentifier) {
    // `match(...)`: decided at the end, once the cell's imports are known.
    patterns_.push_back(PendingPattern{std::string(callee), std::move(by_name), where});
  } else if (IsPatternFunction(callee)) {
    if (literal) {
      CheckPattern(pattern);
    } else {
      patterns_.push_back(PendingPattern{"", std::move(by_name), where});
    }
  }
}

void CellChecker::CheckPattern(TSNode pattern) {
  std::string decoded, problem;
  if (!AppendStringLiteral(pattern, text_, grammar_, decoded, problem)) return;  // f-strings
  if (std::optional<std::size_t> group = FindNestedQuantifier(decoded)) {
    std::string shown = decoded.substr(*group, 40);
    Report(Rule::kSlowPattern, pattern,
           "a regular expression with a repeated group that holds a repeated item (`" + shown +
               "`): re's backtracking can take exponential time in C while CPython holds the "
               "GIL, past any deadline; make the inner item possessive (`a++`, 3.11+), use an "
               "atomic group (`(?>...)`), or drop the nesting");
  }
}

void CellChecker::CheckPendingPatterns() {
  for (const PendingPattern& pending : patterns_) {
    if (!pending.callee.empty()) {
      // A plain name: a regex function only when the cell imported it from re.
      auto it = imported_modules_.find(pending.callee);
      if (it == imported_modules_.end() || !it->second.starts_with("re.") ||
          !IsPatternFunction(std::string_view(it->second).substr(3))) {
        continue;
      }
    }
    if (pending.pattern.empty()) {
      CheckPattern(pending.node);
      continue;
    }
    // A pattern given by name: every string literal the cell binds to that name.
    auto bound = string_bindings_.find(pending.pattern);
    if (bound == string_bindings_.end()) continue;
    for (TSNode literal : bound->second) CheckPattern(literal);
  }
}

// `a ** b`, `a << b`, `s * n`, `x **= n`, `pow(a, b)`, `factorial(n)`: only
// these can make a constant too big; the folding goes through their operands.
void CellChecker::CheckConstantSize(TSNode node) {
  NodeKind kind = grammar_.KindOf(node);
  if (kind == NodeKind::kBinaryOperator) {
    std::string_view op = Text(ts_node_child_by_field_id(node, grammar_.op));
    if (op != "**" && op != "<<" && op != "*") return;
  }
  if (std::optional<std::string> problem = constants_.Check(node)) {
    Report(Rule::kHugeConstant, node, std::move(*problem));
  }
}

// A point where a generator or coroutine stops (yield, await, async for and
// async with) inside a try or with statement of the same function: if it is
// never resumed, its except/finally clauses or __exit__ run when the object
// is collected, on whatever thread collects it (the host's gc.collect()).
void CellChecker::CheckSuspension(TSNode node, const Frame& frame) {
  NodeKind kind = grammar_.KindOf(node);
  bool is_async = (kind == NodeKind::kWithStatement || kind == NodeKind::kForStatement ||
                   kind == NodeKind::kForInClause) && HasAsyncKeyword(node);
  if (kind == NodeKind::kWithStatement && is_async) {
    Report(Rule::kDeferredCode, node,
           "`async with`: a coroutine stopped in it runs __aexit__ when it is collected, "
           "later and on whatever thread collects it; call the context manager's methods "
           "yourself (`await cm.__aenter__()` is not allowed either: keep async cells to "
           "plain awaits)");
    return;
  }
  if (!frame.cleanup_pending) return;
  if (kind == NodeKind::kYield || kind == NodeKind::kAwait || is_async) {
    std::string what = kind == NodeKind::kYield ? "`yield`" : kind == NodeKind::kAwait ? "`await`"
                                                                                        : "`async for`";
    Report(Rule::kDeferredCode, node,
           what + " inside a `try` or `with` statement: if the generator or coroutine is not run "
                  "to the end, its except/finally clauses or __exit__ run when it is collected, "
                  "later and on whatever thread collects it; move the " + what +
                  " out of the try/with block");
  }
}

}  // namespace dolsot::sandbox
