// DeadlineRulesCannotFire (see prescan_deadline.h). Every bound here is
// looser than the full path's rule it stands for: what it accepts, the full
// path (sandbox/constant_size.h, regex_risk.h) accepts too.
#include "sandbox/prescan_deadline.h"

#include <string>
#include <string_view>

#include "sandbox/constant_size.h"
#include "sandbox/format_template.h"
#include "sandbox/regex_risk.h"

namespace dolsot::sandbox::prescan {
namespace {

// A power or shift the fast path accepts: by a name or a float, or by at
// most this (a lone integer) of a name or of a number of at most
// kMaxBaseChars characters.
constexpr double kMaxExponent = 64;
constexpr std::size_t kMaxBaseChars = 15;
// Per logical line, a bound on the digits of every integer the line can fold
// to (number literals at 1.21 digits a character, hex included, plus the
// powers and shifts above) stays under half the full path's limit.
constexpr double kMaxLineDigits = kMaxConstantDigits / 2;
constexpr double kDigitsPerChar = 1.21;  // > log10(16)

bool IsOp(const Token& t, std::string_view op) { return t.type == Tok::kOp && t.text == op; }

// A float or imaginary literal (`0.5`, `1e9`, `2j`): a power or product with
// it is no integer.
bool IsFloatLiteral(const Token& t) {
  if (t.type != Tok::kNumber || (t.text.size() > 1 && (t.text[1] | 0x20) == 'x')) return false;
  return t.text.find_first_of(".eEjJ") != std::string_view::npos;
}

// The value of a decimal integer token, or -1 (a float, hex, imaginary or huge literal).
double IntegerValue(const Token& t) {
  if (t.type != Tok::kNumber || t.text.size() > 12) return -1;
  double value = 0;
  for (char c : t.text) {
    if (c == '_') continue;
    if (c < '0' || c > '9') return -1;  // hex, octal, binary, floats: left to the full path
    value = value * 10 + (c - '0');
  }
  return value;
}

// A number token `t[i]` whose neighbour away from the operator does not bind
// tighter than `*` (`2 ** 9`, `x.y`, a call): its value is the operand.
bool Lone(const std::vector<Token>& t, std::size_t i, bool after) {
  const Token& other = after ? t[i + 1] : t[i - 1];
  if (other.type != Tok::kOp) return true;
  static constexpr std::string_view kTight[] = {"*", "**", "@", "/", "//", "%", "<<", ">>",
                                                ".", "(", "["};
  for (std::string_view op : kTight) {
    if (other.text == op) return false;
  }
  return true;
}

// A plain string token's body decoded (escapes included) holds a nested
// quantifier; f-strings are not literals for the full path.
bool LooksSlow(std::string_view token, std::string& scratch) {
  std::size_t quote = token.find_first_of("'\"");
  if (quote == std::string_view::npos) return true;
  std::string_view prefix = token.substr(0, quote);
  bool raw = false;
  for (char c : prefix) {
    if ((c | 0x20) == 'f') return false;
    raw = raw || (c | 0x20) == 'r';
  }
  std::size_t quotes = token.size() - quote >= 6 && token[quote + 1] == token[quote] &&
                               token[quote + 2] == token[quote]
                           ? 3
                           : 1;
  std::string_view body = token.substr(quote + quotes, token.size() - quote - 2 * quotes);
  if (body.find('\\') == std::string_view::npos) {
    scratch += body;
    return false;
  }
  std::string decoded;
  if (!DecodeLiteralBody(body, raw, decoded)) return true;  // \N{...}: not proven
  scratch += decoded;
  return false;
}

bool IsAtom(const Token& t) {
  switch (t.type) {
    case Tok::kName:
      return !IsKeyword(t.text);
    case Tok::kNumber:
    case Tok::kString:
    case Tok::kStringEnd:
      return true;
    case Tok::kOp:
      return t.text == ")" || t.text == "]" || t.text == "}";
    default:
      return false;
  }
}

// For every bracket, the index of its partner (the lexer checked they pair up).
std::vector<std::size_t> MatchBrackets(const std::vector<Token>& t) {
  std::vector<std::size_t> match(t.size(), 0), open;
  for (std::size_t i = 0; i < t.size(); ++i) {
    bool opens = t[i].type == Tok::kFieldOpen || IsOp(t[i], "(") || IsOp(t[i], "[") || IsOp(t[i], "{");
    bool closes = t[i].type == Tok::kFieldClose || IsOp(t[i], ")") || IsOp(t[i], "]") || IsOp(t[i], "}");
    if (opens) open.push_back(i);
    if (closes && !open.empty()) {
      match[i] = open.back();
      match[open.back()] = i;
      open.pop_back();
    }
  }
  return match;
}

// A bracket pair that is no call or subscript: a display or a parenthesised
// expression, which may hold a literal sequence (`[0]`, `(1, 2)`, `('ab' * 9)`).
bool IsDisplayOrGroup(const std::vector<Token>& t, std::size_t open) {
  return (IsOp(t[open], "(") || IsOp(t[open], "[")) && !(open > 0 && IsAtom(t[open - 1]));
}

// A name other than True/False/None between t[open] and t[close]: an integer
// the full path folds has only literals as leaves, so this one is unknown.
bool HoldsName(const std::vector<Token>& t, std::size_t open, std::size_t close) {
  for (std::size_t j = open + 1; j < close; ++j) {
    if (t[j].type == Tok::kName && !IsKeyword(t[j].text) && t[j].text != "True" &&
        t[j].text != "False" && t[j].text != "None") {
      return true;
    }
  }
  return false;
}

}  // namespace

bool DeadlineRulesCannotFire(const std::vector<Token>& t) {
  const std::vector<std::size_t> match = MatchBrackets(t);
  bool suspends = false, cleans_up = false;
  std::string run;  // adjacent plain string literals, decoded: one concatenated literal
  std::size_t line_start = 0;
  double line_digits = 0;  // see kMaxLineDigits
  double repeats = 1;  // product of literal repetition counts in the logical line
  for (std::size_t i = 0; i < t.size(); ++i) {
    const Token& tok = t[i];
    if (tok.type == Tok::kString) {
      if (LooksSlow(tok.text, run)) return false;
      continue;
    }
    if (tok.type != Tok::kStringEnd && !run.empty()) {
      if (FindNestedQuantifier(run)) return false;
      run.clear();
    }
    if (tok.type == Tok::kNewline || tok.type == Tok::kEnd) {
      // The line's bytes bound every literal sequence in it (string length, elements).
      double line_bytes = static_cast<double>(tok.text.data() - t[line_start].text.data());
      if (repeats * (line_bytes + 1) > kMaxSequenceLength) return false;
      repeats = 1;
      line_digits = 0;
      line_start = i + 1;
      continue;
    }
    if (tok.type == Tok::kNumber) line_digits += kDigitsPerChar * static_cast<double>(tok.text.size());
    if (line_digits > kMaxLineDigits) return false;
    if (tok.type == Tok::kName) {
      std::string_view name = tok.text;
      if (name == "yield" || name == "await" || name == "async") suspends = true;
      if (name == "try" || name == "with") cleans_up = true;
      if (name == "async" && t[i + 1].type == Tok::kName && t[i + 1].text == "with") return false;
      if (name == "pow" || name == "factorial" || name == "comb" || name == "perm") return false;
      continue;
    }
    if (tok.type != Tok::kOp || i == 0) continue;
    const Token& left = t[i - 1];
    const Token& right = t[i + 1];
    if (tok.text == "**=" || tok.text == "<<=") {
      // The amount is the whole right-hand side: one name, float or small integer.
      bool end = t[i + 2].type == Tok::kNewline || t[i + 2].type == Tok::kEnd || IsOp(t[i + 2], ";");
      bool name = right.type == Tok::kName && !IsKeyword(right.text) && right.text != "True" &&
                  right.text != "False";
      double amount = IntegerValue(right);
      if (!end || !(name || IsFloatLiteral(right) || (amount >= 0 && amount <= kMaxExponent))) {
        return false;
      }
    } else if (tok.text == "**" || tok.text == "<<") {
      // By a name (the full path cannot fold it) or a float: no big integer.
      if ((right.type == Tok::kName && !IsOp(t[i + 2], "**")) || IsFloatLiteral(right)) continue;
      double exponent = IntegerValue(right);
      if (exponent < 0 || exponent > kMaxExponent || !Lone(t, i + 1, true)) return false;
      if (left.type == Tok::kName) continue;  // of a value it cannot fold
      if (left.type != Tok::kNumber || left.text.size() > kMaxBaseChars) return false;
      line_digits += tok.text == "**" ? kDigitsPerChar * static_cast<double>(left.text.size()) * exponent
                                      : exponent;
    } else if (tok.text == "*") {
      // A literal sequence (a string, a display or a group) repeated by a
      // count: each side that may be the sequence makes the other the count.
      bool sequence_left = left.type == Tok::kString || left.type == Tok::kStringEnd ||
                           ((IsOp(left, ")") || IsOp(left, "]")) && IsDisplayOrGroup(t, match[i - 1]));
      bool sequence_right = right.type == Tok::kString ||
                            ((IsOp(right, "(") || IsOp(right, "[")) && IsDisplayOrGroup(t, i + 1));
      for (int side = 0; side < 2; ++side) {
        if (!(side == 0 ? sequence_left : sequence_right)) continue;
        std::size_t at = side == 0 ? i + 1 : i - 1;  // the count's token next to the `*`
        const Token& count = t[at];
        if (count.type == Tok::kName && !IsKeyword(count.text)) continue;  // cannot be folded
        bool bracket = side == 0 ? IsOp(count, "(") || IsOp(count, "[")
                                 : IsOp(count, ")") || IsOp(count, "]");
        if (bracket) {
          std::size_t open = side == 0 ? at : match[at], close = side == 0 ? match[at] : at;
          if (IsDisplayOrGroup(t, open) && HoldsName(t, open, close)) continue;
          return false;
        }
        double value = IntegerValue(count);
        if (value < 0 || !Lone(t, at, side == 0)) return false;
        repeats *= value > 1 ? value : 1;
        if (repeats > kMaxSequenceLength) return false;
      }
    }
  }
  if (!run.empty() && FindNestedQuantifier(run)) return false;
  return !(suspends && cleans_up);
}

}  // namespace dolsot::sandbox::prescan
