// ConstantSizes: folds constant integer expressions to bounds on their size
// (see constant_size.h). Exact values are kept while they fit in 64 bits;
// beyond that only an upper bound on the number of decimal digits.
#include "sandbox/constant_size.h"

#include <cmath>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

namespace dolsot::sandbox {
namespace {

constexpr double kLog10Of2 = 0.30102999566398120;
// 2 ** n has more than kMaxConstantDigits digits from here on: the bound for
// a power or shift of a value the gate cannot see (at least 2 when it matters).
const double kUnknownBaseExponent = std::ceil(kMaxConstantDigits / kLog10Of2);

bool Is(TSNode node, std::string_view type) {
  return !ts_node_is_null(node) && std::string_view(ts_node_type(node)) == type;
}

double DigitsOf(std::int64_t v) {
  if (v == 0) return 1;
  double magnitude = std::fabs(static_cast<double>(v));
  return std::floor(std::log10(magnitude)) + 1;
}

// An integer literal (`1_000`, `0x_ff`, `0o17`, `0b1`); nullopt for an
// imaginary literal (`10j`).
bool ParseInteger(std::string_view text, std::int64_t& exact, bool& fits, double& digits) {
  if (!text.empty() && (text.back() == 'j' || text.back() == 'J')) return false;
  int base = 10;
  if (text.size() > 1 && text[0] == '0') {
    char p = static_cast<char>(text[1] | 0x20);
    base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 10;
    if (base != 10) text.remove_prefix(2);
  }
  fits = true;
  exact = 0;
  std::size_t count = 0;
  bool leading = true;
  for (char c : text) {
    if (c == '_') continue;
    int d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    if (d < 0 || d >= base) return false;
    if (leading && d == 0) continue;
    leading = false;
    ++count;
    if (fits && (__builtin_mul_overflow(exact, base, &exact) || __builtin_add_overflow(exact, d, &exact))) {
      fits = false;
    }
  }
  digits = fits ? DigitsOf(exact) : std::ceil(static_cast<double>(count) * std::log10(base));
  return true;
}

// log10(n!) for n >= 0.
double Log10Factorial(double n) { return std::lgamma(n + 1) / std::log(10.0); }

}  // namespace

const ConstantSizes::Value& ConstantSizes::Memo(TSNode node) const {
  static const Value kUnknown{};
  auto it = memo_.find(node.id);
  return it == memo_.end() ? kUnknown : it->second;
}

ConstantSizes::Value ConstantSizes::Over(TSNode node, std::string message) {
  problems_.emplace(node.id, std::move(message));
  return Value{};  // reported here: unknown to the expressions around it
}

std::optional<std::string> ConstantSizes::Check(TSNode node) {
  Fold(node);
  auto it = problems_.find(node.id);
  if (it == problems_.end()) return std::nullopt;
  std::string message = std::move(it->second);
  problems_.erase(it);
  return message;
}

// Post-order over the foldable nodes under `root` (an explicit stack: trees
// can be thousands of levels deep), each node folded once per cell.
ConstantSizes::Value ConstantSizes::Fold(TSNode root) {
  std::vector<std::pair<TSNode, bool>> stack{{root, false}};
  while (!stack.empty()) {
    auto [node, operands_done] = stack.back();
    stack.pop_back();
    if (memo_.contains(node.id)) continue;
    if (operands_done) {
      memo_.emplace(node.id, FoldOne(node));
      continue;
    }
    stack.emplace_back(node, true);
    std::string_view type = ts_node_type(node);
    if (type == "parenthesized_expression") {
      stack.emplace_back(ts_node_named_child(node, 0), false);
    } else if (type == "unary_operator") {
      stack.emplace_back(ts_node_child_by_field_id(node, grammar_.argument), false);
    } else if (type == "binary_operator") {
      stack.emplace_back(ts_node_child_by_field_id(node, grammar_.left), false);
      stack.emplace_back(ts_node_child_by_field_id(node, grammar_.right), false);
    } else if (type == "augmented_assignment") {
      stack.emplace_back(ts_node_child_by_field_id(node, grammar_.right), false);
    } else if (type == "call") {
      TSNode arguments = ts_node_child_by_field_id(node, grammar_.arguments);
      for (uint32_t i = 0; !ts_node_is_null(arguments) && i < ts_node_named_child_count(arguments); ++i) {
        stack.emplace_back(ts_node_named_child(arguments, i), false);
      }
    }
    // Null children (a tree with errors) are never pushed twice: memo_ then holds them.
    while (!stack.empty() && ts_node_is_null(stack.back().first)) stack.pop_back();
  }
  return Memo(root);
}

ConstantSizes::Value ConstantSizes::FoldOne(TSNode node) {
  std::string_view type = ts_node_type(node);
  Value v;
  if (type == "integer") {
    std::int64_t exact = 0;
    bool fits = false;
    double digits = 0;
    if (!ParseInteger(text_.Text(node), exact, fits, digits)) return Value{Value::Type::kFloat};
    v.type = Value::Type::kInt;
    v.exact = fits;
    v.value = exact;
    v.digits = digits;
    return v;
  }
  if (type == "float") return Value{Value::Type::kFloat};
  if (type == "true" || type == "false") {
    v.type = Value::Type::kInt;
    v.exact = true;
    v.value = type == "true" ? 1 : 0;
    v.digits = 1;
    return v;
  }
  if (type == "string" || type == "concatenated_string") {
    // f-strings are not folded; the text's length bounds a literal's.
    std::string_view text = text_.Text(node);
    if (text.find('{') != std::string_view::npos) {
      for (char c : text.substr(0, text.find_first_of("'\""))) {
        if ((c | 0x20) == 'f' || (c | 0x20) == 't') return Value{};
      }
    }
    v.type = Value::Type::kSequence;
    v.length = static_cast<double>(text.size());
    return v;
  }
  if (type == "list" || type == "tuple") {
    double count = 0;
    for (uint32_t i = 0; i < ts_node_named_child_count(node); ++i) {
      std::string_view child = ts_node_type(ts_node_named_child(node, i));
      if (child == "list_splat" || child == "comment") return child == "comment" ? v : Value{};
      ++count;
    }
    v.type = Value::Type::kSequence;
    v.length = count;
    return v;
  }
  if (type == "parenthesized_expression") return Memo(ts_node_named_child(node, 0));
  if (type == "unary_operator") {
    Value operand = Memo(ts_node_child_by_field_id(node, grammar_.argument));
    if (operand.type != Value::Type::kInt) return operand.type == Value::Type::kFloat ? operand : Value{};
    std::string_view op = text_.Text(ts_node_child_by_field_id(node, grammar_.op));
    if (operand.exact && operand.value != std::numeric_limits<std::int64_t>::min()) {
      operand.value = op == "-" ? -operand.value : op == "~" ? ~operand.value : operand.value;
    } else {
      operand.exact = false;
      operand.digits += 1;
    }
    return operand;
  }
  if (type == "binary_operator") {
    std::string_view op = text_.Text(ts_node_child_by_field_id(node, grammar_.op));
    return Binary(node, op, Memo(ts_node_child_by_field_id(node, grammar_.left)),
                  Memo(ts_node_child_by_field_id(node, grammar_.right)));
  }
  if (type == "augmented_assignment") return Augmented(node);
  if (type == "call") return Call(node);
  return Value{};
}

ConstantSizes::Value ConstantSizes::Binary(TSNode node, std::string_view op, const Value& a,
                                           const Value& b) {
  using Type = Value::Type;
  const bool ints = a.type == Type::kInt && b.type == Type::kInt;
  Value v;
  v.type = Type::kInt;
  if (op == "**") {
    if (b.type != Type::kInt) return Value{b.type == Type::kFloat ? Type::kFloat : Type::kUnknown};
    if (b.exact && b.value < 0) return Value{Type::kFloat};
    if (a.type == Type::kFloat) return a;
    if (a.type != Type::kInt) {
      // A value the gate cannot see: at least 2 when the power is big.
      if (!b.exact || static_cast<double>(b.value) >= kUnknownBaseExponent) {
        return Over(node, "a power by " + (b.exact ? std::to_string(b.value) : std::string("a huge literal")) +
                              ": for any base of at least 2 the result has over a million digits "
                              "(computed in C while CPython holds the GIL: no deadline can stop it)");
      }
      return Value{};
    }
    if (a.exact && a.value >= -1 && a.value <= 1) {
      v.exact = true;
      v.value = (a.value == -1 && b.exact && b.value % 2 == 0) ? 1 : a.value;
      v.digits = 1;
      return v;
    }
    double log_base = a.exact ? std::log10(std::fabs(static_cast<double>(a.value))) : a.digits;
    double digits = b.exact ? static_cast<double>(b.value) * log_base + 1
                            : std::numeric_limits<double>::infinity();
    v.digits = digits;
    if (a.exact && b.exact && digits < 18) {
      std::int64_t result = 1;
      for (std::int64_t i = 0; i < b.value; ++i) result *= a.value;
      v.exact = true;
      v.value = result;
      v.digits = DigitsOf(result);
    }
  } else if (op == "<<") {
    if (!ints) return Value{};
    if (b.exact && b.value < 0) return Value{};  // ValueError
    double bits = b.exact ? static_cast<double>(b.value) : std::numeric_limits<double>::infinity();
    if (a.exact && a.value == 0) {
      v.exact = true;
      v.digits = 1;
      return v;
    }
    v.digits = a.digits + bits * kLog10Of2 + 1;
    if (a.exact && b.exact && b.value < 62 && v.digits < 18) {
      v.exact = true;
      v.value = a.value * (std::int64_t{1} << b.value);
      v.digits = DigitsOf(v.value);
    }
  } else if (op == "*") {
    if (ints) {
      std::int64_t product = 0;
      v.exact = a.exact && b.exact && !__builtin_mul_overflow(a.value, b.value, &product);
      v.value = product;
      v.digits = v.exact ? DigitsOf(product) : a.digits + b.digits;
    } else if ((a.type == Type::kSequence && b.type == Type::kInt) ||
               (a.type == Type::kInt && b.type == Type::kSequence)) {
      const Value& sequence = a.type == Type::kSequence ? a : b;
      const Value& count = a.type == Type::kInt ? a : b;
      double times = count.exact ? static_cast<double>(count.value) : std::numeric_limits<double>::infinity();
      if (sequence.length > 0 && times * sequence.length > kMaxSequenceLength) {
        return Over(node, "a literal sequence repeated " +
                              std::string(count.exact ? std::to_string(count.value) : "that many") +
                              " times: the result would hold over 100 million items");
      }
      return Value{Type::kSequence, false, 0, 0, std::max(0.0, times * sequence.length)};
    } else {
      return Value{(a.type == Type::kFloat || b.type == Type::kFloat) && a.type != Type::kUnknown &&
                           b.type != Type::kUnknown
                       ? Type::kFloat
                       : Type::kUnknown};
    }
  } else if (ints && (op == "+" || op == "-" || op == "&" || op == "|" || op == "^" ||
                      op == ">>" || op == "//" || op == "%")) {
    std::int64_t result = 0;
    bool exact = a.exact && b.exact;
    if (exact) {
      if (op == "+") exact = !__builtin_add_overflow(a.value, b.value, &result);
      else if (op == "-") exact = !__builtin_sub_overflow(a.value, b.value, &result);
      else if (op == "&") result = a.value & b.value;
      else if (op == "|") result = a.value | b.value;
      else if (op == "^") result = a.value ^ b.value;
      else exact = false;  // >>, //, %: bounded below, not worth exact Python semantics
    }
    v.exact = exact;
    v.value = result;
    v.digits = exact ? DigitsOf(result) : std::max(a.digits, b.digits) + 1;
    if (op == ">>" || op == "//") v.digits = a.digits;
    if (op == "%") v.digits = b.digits;
    return v;
  } else {
    bool floats = (a.type == Type::kFloat || b.type == Type::kFloat) &&
                  a.type != Type::kUnknown && b.type != Type::kUnknown;
    return Value{floats || (ints && op == "/") ? Type::kFloat : Type::kUnknown};
  }
  if (v.digits > kMaxConstantDigits) {
    return Over(node, "`" + std::string(op) + "` of literals whose result has over a million digits "
                      "(computed in C while CPython holds the GIL: no deadline can stop it)");
  }
  return v;
}

// `x **= n`, `x <<= n`: the target is a value the gate cannot see.
ConstantSizes::Value ConstantSizes::Augmented(TSNode node) {
  std::string_view op;
  for (uint32_t i = 0; i < ts_node_child_count(node); ++i) {
    TSNode child = ts_node_child(node, i);
    if (!ts_node_is_named(child)) op = ts_node_type(child);
  }
  if (op != "**=" && op != "<<=") return Value{};
  const Value& amount = Memo(ts_node_child_by_field_id(node, grammar_.right));
  if (amount.type != Value::Type::kInt || (amount.exact && static_cast<double>(amount.value) < kUnknownBaseExponent)) {
    return Value{};
  }
  return Over(node, "`" + std::string(op) + "` by " +
                        std::string(text_.Text(ts_node_child_by_field_id(node, grammar_.right))) +
                        ": for any value of at least 2 the result has over a million digits");
}

// pow(a, b) and factorial(n) / comb(n, k) / perm(n, k) under any spelling of
// the callee (`math.factorial`, `from math import factorial as f` is not seen).
ConstantSizes::Value ConstantSizes::Call(TSNode node) {
  TSNode function = ts_node_child_by_field_id(node, grammar_.function);
  TSNode arguments = ts_node_child_by_field_id(node, grammar_.arguments);
  if (ts_node_is_null(function) || ts_node_is_null(arguments)) return Value{};
  std::string_view name;
  if (Is(function, "identifier")) {
    name = text_.Text(function);
  } else if (Is(function, "attribute")) {
    name = text_.Text(ts_node_child_by_field_id(function, grammar_.attribute));
  }
  std::vector<TSNode> args;
  for (uint32_t i = 0; i < ts_node_named_child_count(arguments); ++i) {
    TSNode argument = ts_node_named_child(arguments, i);
    std::string_view kind = ts_node_type(argument);
    if (kind == "comment") continue;
    if (kind == "keyword_argument" || kind == "list_splat" || kind == "dictionary_splat") return Value{};
    args.push_back(argument);
  }
  if (name == "pow" && Is(function, "identifier") && args.size() == 2) {
    return Binary(node, "**", Memo(args[0]), Memo(args[1]));
  }
  double digits = 0;
  if (name == "factorial" && args.size() == 1) {
    const Value& n = Memo(args[0]);
    if (n.type != Value::Type::kInt) return Value{};
    digits = n.exact ? (n.value < 0 ? 0 : Log10Factorial(static_cast<double>(n.value)))
                     : std::numeric_limits<double>::infinity();
  } else if ((name == "comb" || name == "perm") && args.size() == 2) {
    const Value& n = Memo(args[0]);
    const Value& k = Memo(args[1]);
    if (n.type != Value::Type::kInt || k.type != Value::Type::kInt) return Value{};
    if (!n.exact) {
      digits = std::numeric_limits<double>::infinity();
    } else if (k.exact && n.value >= 0 && k.value >= 0 && k.value <= n.value) {
      double nn = static_cast<double>(n.value), kk = static_cast<double>(k.value);
      digits = Log10Factorial(nn) - Log10Factorial(nn - kk) - (name == "comb" ? Log10Factorial(kk) : 0);
    }
  } else {
    return Value{};
  }
  if (digits > kMaxConstantDigits) {
    return Over(node, "`" + std::string(name) + "(...)` of literals whose result has over a million "
                      "digits (computed in C while CPython holds the GIL: no deadline can stop it)");
  }
  return Value{Value::Type::kInt, false, 0, digits + 1, 0};
}

}  // namespace dolsot::sandbox
