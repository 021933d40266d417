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

// A comparison's operators: kIdentity when all are `is` / `is not`,
// kEquality when it is one `==` / `!=` between two operands, else kOther.
Use ClassifyComparison(TSNode comparison, TSNode operand) {
  bool identity = true, equality = true;
  uint32_t operands = 0;
  TSNode other{};
  for (uint32_t i = 0; i < ts_node_child_count(comparison); ++i) {
    TSNode child = ts_node_child(comparison, i);
    if (ts_node_is_named(child)) {
      ++operands;
      if (!ts_node_eq(child, operand)) other = child;
      continue;
    }
    std::string_view op = ts_node_type(child);
    identity = identity && (op == "is" || op == "is not");
    equality = equality && (op == "==" || op == "!=");
  }
  if (identity) return Use{UsePosition::kIdentity, {}};
  if (equality && operands == 2) return Use{UsePosition::kEquality, other};
  return {};
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
