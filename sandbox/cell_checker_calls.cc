// The gate's calls (see cell_checker.h): calls that make classes from data
// (`type()` with three arguments, the Enum functional API), `type(x)` and what
// is done with it, and `deepcopy` with a memo.
#include "sandbox/cell_checker.h"

#include "sandbox/rules.h"

namespace dolsot::sandbox {
namespace {

// type(), enum classes called with names: both make classes from data.
bool IsEnumClassName(std::string_view name) {
  return name == "Enum" || name == "IntEnum" || name == "StrEnum" || name == "Flag" ||
         name == "IntFlag" || name == "ReprEnum";
}

}  // namespace

// Calls that make classes or change module tables.
void CellChecker::CheckCall(TSNode call, const Frame& frame) {
  TSNode function = ts_node_child_by_field_id(call, grammar_.function);
  TSNode arguments = ts_node_child_by_field_id(call, grammar_.arguments);
  NodeKind function_kind = grammar_.KindOf(function);
  std::string callee;
  if (function_kind == NodeKind::kIdentifier) {
    callee = Name(function);
    // `type(...)` and `ExceptionGroup(...)` are the uses of these names that
    // CheckIdentifier lets through (the arguments are checked here).
    if (callee == "type" || callee == "ExceptionGroup" || callee == "BaseExceptionGroup" ||
        callee == "deepcopy") {
      plain_callees_.insert(ts_node_start_byte(function));
    }
  } else if (function_kind == NodeKind::kAttribute) {
    TSNode attribute = ts_node_child_by_field_id(function, grammar_.attribute);
    if (!ts_node_is_null(attribute)) callee = Name(attribute);
    if (callee == "deepcopy") plain_callees_.insert(ts_node_start_byte(attribute));
    if (IsMutatingMethod(callee)) {
      RecordStore(function, ts_node_child_by_field_id(function, grammar_.object), true);
    }
  }
  CheckPatternCall(call, function, callee);
  if (callee == "pow" || callee == "factorial" || callee == "comb" || callee == "perm") {
    CheckConstantSize(call);
  }
  uint32_t positional = 0;
  bool other = false;  // keywords, splats
  uint32_t count = ts_node_is_null(arguments) ? 0 : ts_node_named_child_count(arguments);
  for (uint32_t i = 0; i < count; ++i) {
    TSNode argument = ts_node_named_child(arguments, i);
    std::string_view kind = ts_node_type(argument);
    if (kind == "comment") continue;
    if (kind == "keyword_argument" || kind == "list_splat" || kind == "dictionary_splat") {
      other = true;
    } else {
      ++positional;
    }
  }
  bool type_call = callee == "type" && function_kind == NodeKind::kIdentifier;
  // `type(x)` is a class; called again it may be a metaclass (`type(int)` is `type`).
  bool type_result_call = false;
  if (function_kind == NodeKind::kCall) {
    TSNode inner = ts_node_child_by_field_id(function, grammar_.function);
    type_result_call = grammar_.KindOf(inner) == NodeKind::kIdentifier && Name(inner) == "type";
  }
  if (type_call && positional == 1 && !other && !frame.type_is_local && !frame.in_bases) {
    CheckTypeResultUse(call);
  }
  if (type_call && frame.in_bases) {
    Report(Rule::kConstructDenied, call,
           "a base class computed by `type()`: it may be a toolbox's class, an exception group "
           "or `type` itself; name the base class");
  }
  if (type_call && (positional != 1 || other)) {
    Report(Rule::kConstructDenied, call,
           "`type()` with more than one argument makes a class from a dict the gate cannot "
           "see (dunder keys): define the class with `class`");
  } else if (type_result_call && (positional > 2 || other)) {
    Report(Rule::kConstructDenied, call,
           "calling what `type(x)` returns with three arguments or a splat: when `x` is a "
           "class that is a metaclass, which makes a class from a dict the gate cannot see");
  } else if (callee == "deepcopy" && (positional > 1 || other)) {
    Report(Rule::kConstructDenied, call,
           "`deepcopy` with a memo: the memo substitutes objects inside the copy, which builds "
           "an instance of any class without its __init__; call `copy.deepcopy(x)`");
  } else if (!type_call && IsEnumClassName(callee) && (positional > 1 || other)) {
    Report(Rule::kConstructDenied, call,
           "the Enum functional API makes a class from names the gate cannot see: define "
           "the enum with `class " + callee + "`");
  }
}

// `type(x)` is a class, and `type(int)` is `type` itself, which makes classes
// from dicts: the result is used in place only (an attribute, a comparison,
// an f-string, a further call CheckCall bounds, or shown by print/str/repr/
// isinstance/issubclass), never bound or passed on.
void CellChecker::CheckTypeResultUse(TSNode call) {
  std::string message =
      "`type(x)` kept or passed on as a value: it may be `type` itself (`type(int)`), which "
      "makes classes from dicts; use it in place (`type(x).__name__`, `type(x) is int`, "
      "`print(type(x))`)";
  Use use = ClassifyUse(call, grammar_, false);
  switch (use.position) {
    case UsePosition::kAttributeObject:
    case UsePosition::kCallee:
    case UsePosition::kIdentity:
    case UsePosition::kInterpolation:
      return;
    case UsePosition::kEquality:
      // `==` may run the other operand's __eq__: a builtin class, an own class
      // (its metaclass is `type`) or another type(y) only.
      if (grammar_.KindOf(use.other) == NodeKind::kIdentifier) {
        builtin_uses_.push_back(BuiltinUse{std::string(Name(use.other)), call,
                                           Rule::kConstructDenied, message, true});
        return;
      }
      if (grammar_.KindOf(use.other) == NodeKind::kCall &&
          IsBuiltinCallee(ts_node_child_by_field_id(use.other, grammar_.function), {"type"})) {
        return;
      }
      break;
    case UsePosition::kArgument:
      if (IsBuiltinCallee(use.other, {"isinstance", "issubclass"}) && !use.in_tuple) {
        builtin_uses_.push_back(BuiltinUse{std::string(Name(use.other)), call,
                                           Rule::kConstructDenied, message});
        return;
      }
      if (ShownOnly(use, call, Rule::kConstructDenied, message)) return;
      break;
    default:
      if (TypeResultInBuiltins(call, message)) return;
      break;
  }
  Report(Rule::kConstructDenied, call, std::move(message));
}

// `type(x) in (int, float)`: a container literal of builtin names only (no
// __eq__ of the cell's runs).
bool CellChecker::TypeResultInBuiltins(TSNode call, const std::string& message) {
  TSNode comparison = ts_node_parent(call);
  if (std::string_view(ts_node_type(comparison)) != "comparison_operator" ||
      ts_node_child_count(comparison) != 3 || !ts_node_eq(ts_node_child(comparison, 0), call)) {
    return false;
  }
  std::string_view op = ts_node_type(ts_node_child(comparison, 1));
  TSNode container = ts_node_child(comparison, 2);
  std::string_view kind = ts_node_type(container);
  if ((op != "in" && op != "not in") || (kind != "tuple" && kind != "list" && kind != "set")) {
    return false;
  }
  std::vector<std::string> names;
  for (uint32_t i = 0; i < ts_node_named_child_count(container); ++i) {
    TSNode element = ts_node_named_child(container, i);
    if (grammar_.KindOf(element) != NodeKind::kIdentifier || !IsBuiltinName(Name(element))) return false;
    names.emplace_back(Name(element));
  }
  for (std::string& name : names) {
    builtin_uses_.push_back(BuiltinUse{std::move(name), call, Rule::kConstructDenied, message});
  }
  return true;
}

}  // namespace dolsot::sandbox
