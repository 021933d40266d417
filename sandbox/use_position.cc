// ClassifyUse: the position of an expression among its parents (see
// use_position.h). Node kinds the gate does not resolve in PythonGrammar are
// compared by name; this runs only for the few uses the rules ask about.
#include "sandbox/use_position.h"

#include <string_view>

namespace dolsot::sandbox {
namespace {

bool Is(TSNode node, std::string_view type) {
  return !ts_node_is_null(node) && std::string_view(ts_node_type(node)) == type;
}

// A literal the gate can read: no code of the cell's runs when it is compared.
bool IsLiteral(TSNode node, int depth = 0) {
  std::string_view type = ts_node_type(node);
  while ((type == "unary_operator" || type == "parenthesized_expression") &&
         ts_node_named_child_count(node) > 0) {  // `-1`, `("a")`
    node = ts_node_named_child(node, ts_node_named_child_count(node) - 1);
    type = ts_node_type(node);
  }
  if (type == "integer" || type == "float" || type == "true" || type == "false" ||
      type == "none" || type == "string" || type == "concatenated_string") {
    return true;
  }
  if ((type == "tuple" || type == "list" || type == "set") && depth == 0) {
    for (uint32_t i = 0; i < ts_node_named_child_count(node); ++i) {
      if (!IsLiteral(ts_node_named_child(node, i), depth + 1)) return false;
    }
    return true;
  }
  return false;
}

// A comparison's operators: kIdentity when all are `is` / `is not`,
// kEquality when it is one `==` / `!=` between two operands, else kComparison.
Use ClassifyComparison(TSNode comparison, TSNode operand) {
  bool identity = true, equality = true, literals = true;
  uint32_t operands = 0;
  TSNode other{};
  for (uint32_t i = 0; i < ts_node_child_count(comparison); ++i) {
    TSNode child = ts_node_child(comparison, i);
    if (ts_node_is_named(child)) {
      ++operands;
      if (!ts_node_eq(child, operand)) {
        other = child;
        literals = literals && IsLiteral(child);
      }
      continue;
    }
    std::string_view op = ts_node_type(child);
    identity = identity && (op == "is" || op == "is not");
    equality = equality && (op == "==" || op == "!=");
  }
  Use use{UsePosition::kComparison, {}};
  if (identity) use.position = UsePosition::kIdentity;
  if (equality && operands == 2) use = Use{UsePosition::kEquality, other};
  use.literal_operands = literals;
  return use;
}

// `node` is tested for truth only (see UsePosition::kTest).
bool IsTested(TSNode node, TSNode parent) {
  std::string_view type = ts_node_type(parent);
  if (type == "not_operator" || type == "if_clause") return true;
  if (type == "if_statement" || type == "elif_clause" || type == "while_statement") {
    return ts_node_eq(ts_node_child_by_field_name(parent, "condition", 9), node);
  }
  if (type == "conditional_expression" || type == "assert_statement") {
    // `a if COND else b`; `assert COND, message` (the message is kept).
    return ts_node_eq(ts_node_named_child(parent, type == "assert_statement" ? 0 : 1), node);
  }
  return false;
}

}  // namespace

Use ClassifyUse(TSNode node, const PythonGrammar& grammar, bool through_subscripts) {
  TSNode parent = ts_node_parent(node);
  while (true) {
    if (Is(parent, "parenthesized_expression")) {
      node = parent;
    } else if (through_subscripts && grammar.KindOf(parent) == NodeKind::kSubscript &&
               ts_node_eq(ts_node_child_by_field_id(parent, grammar.value), node)) {
      node = parent;
    } else {
      break;
    }
    parent = ts_node_parent(node);
  }
  // `a and b` is a or b: an operand is tested only where the whole is.
  bool in_boolean = false;
  while (Is(parent, "boolean_operator") || (in_boolean && Is(parent, "parenthesized_expression"))) {
    in_boolean = true;
    node = parent;
    parent = ts_node_parent(node);
  }
  if (in_boolean) {
    if (Is(parent, "expression_statement")) return Use{UsePosition::kStatement, {}};
    if (IsTested(node, parent)) return Use{UsePosition::kTest, {}};
    return {};
  }
  if (ts_node_is_null(parent)) return {};
  switch (grammar.KindOf(parent)) {
    case NodeKind::kCall:
      if (ts_node_eq(ts_node_child_by_field_id(parent, grammar.function), node)) {
        return Use{UsePosition::kCallee, {}};
      }
      return {};
    case NodeKind::kAttribute:
      if (ts_node_eq(ts_node_child_by_field_id(parent, grammar.object), node)) {
        return Use{UsePosition::kAttributeObject,
                   ts_node_child_by_field_id(parent, grammar.attribute)};
      }
      return {};
    case NodeKind::kInterpolation:
      return Use{UsePosition::kInterpolation, {}};
    case NodeKind::kDottedName:
      // `case X(...)`: a class pattern's class is a one-part dotted name.
      if (grammar.KindOf(ts_node_parent(parent)) == NodeKind::kClassPattern &&
          ts_node_named_child_count(parent) == 1) {
        return Use{UsePosition::kClassPattern, {}};
      }
      return {};
    default:
      break;
  }
  if (Is(parent, "comparison_operator")) return ClassifyComparison(parent, node);
  if (Is(parent, "expression_statement")) return Use{UsePosition::kStatement, {}};
  if (IsTested(node, parent)) return Use{UsePosition::kTest, {}};
  // `f(X)` or `isinstance(v, X)` / `isinstance(v, (X, Y))`.
  TSNode arguments = parent;
  bool in_tuple = false;
  if (Is(parent, "tuple")) {
    arguments = ts_node_parent(parent);
    in_tuple = true;
  }
  if (!Is(arguments, "argument_list")) return {};
  TSNode call = ts_node_parent(arguments);
  if (grammar.KindOf(call) != NodeKind::kCall) return {};
  TSNode callee = ts_node_child_by_field_id(call, grammar.function);
  if (grammar.KindOf(callee) != NodeKind::kIdentifier) return {};
  TSNode argument = in_tuple ? parent : node;
  Use use{UsePosition::kArgument, callee, 0, 0, in_tuple};
  bool found = false;
  for (uint32_t i = 0; i < ts_node_named_child_count(arguments); ++i) {
    TSNode child = ts_node_named_child(arguments, i);
    NodeKind kind = grammar.KindOf(child);
    if (kind == NodeKind::kKeywordArgument || kind == NodeKind::kComment) continue;
    if (Is(child, "list_splat") || Is(child, "dictionary_splat")) return {};
    if (ts_node_eq(child, argument)) {
      use.index = use.count;
      found = true;
    }
    ++use.count;
  }
  if (found) return use;
  return {};
}

}  // namespace dolsot::sandbox
