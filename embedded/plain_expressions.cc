// PlainExpressions (see plain_expressions.h): a cell's tokens, cut as
// CPython's tokenizer cuts them, checked against a small alphabet.
#include "embedded/plain_expressions.h"

#include "core/python_chars.h"

namespace dolsot {
namespace {

// The keywords an expression of these tokens may hold.
bool ExpressionKeyword(std::string_view word) {
  static constexpr std::string_view kWords[] = {"and", "or", "not", "in", "is", "None", "True", "False"};
  for (std::string_view allowed : kWords) {
    if (word == allowed) return true;
  }
  return false;
}

// Every other hard keyword of Python 3.10-3.13 (a statement, a block, a
// lambda, a comprehension, an await, `if`/`else` too).
bool OtherKeyword(std::string_view word) {
  static constexpr std::string_view kWords[] = {
      "as",     "assert", "async", "await",  "break", "class",    "continue", "def",
      "del",    "elif",   "else",  "except", "finally", "for",    "from",     "global",
      "if",     "import", "lambda", "nonlocal", "pass", "raise",  "return",   "try",
      "while",  "with",   "yield"};
  for (std::string_view refused : kWords) {
    if (word == refused) return true;
  }
  return false;
}

// Skips the digits (and underscores) of `digit` from code[i]; returns the end.
template <typename Digit>
std::size_t SkipDigits(std::string_view code, std::size_t i, Digit digit) {
  while (i < code.size() && (digit(code[i]) || code[i] == '_')) ++i;
  return i;
}

// The end of the number literal at code[i] (a digit), or npos when it does
// not read as exactly one literal followed by a token boundary.
std::size_t NumberEnd(std::string_view code, std::size_t i) {
  auto at = [&](std::size_t k) { return k < code.size() ? code[k] : '\0'; };
  if (code[i] == '0' && (at(i + 1) == 'x' || at(i + 1) == 'X' || at(i + 1) == 'o' ||
                         at(i + 1) == 'O' || at(i + 1) == 'b' || at(i + 1) == 'B')) {
    const char base = static_cast<char>(at(i + 1) | 0x20);
    std::size_t end = SkipDigits(code, i + 2, [base](char c) {
      if (base == 'x') return IsAsciiHexDigit(c);
      if (base == 'o') return c >= '0' && c <= '7';
      return c == '0' || c == '1';
    });
    if (end == i + 2) return std::string_view::npos;
    i = end;
  } else {
    i = SkipDigits(code, i, IsAsciiDigit);
    if (at(i) == '.' && IsAsciiDigit(at(i + 1))) i = SkipDigits(code, i + 1, IsAsciiDigit);
    if (at(i) == 'e' || at(i) == 'E') {
      std::size_t k = i + 1;
      if (at(k) == '+' || at(k) == '-') ++k;
      if (!IsAsciiDigit(at(k))) return std::string_view::npos;
      i = SkipDigits(code, k, IsAsciiDigit);
    }
    if (at(i) == 'j' || at(i) == 'J') ++i;
  }
  // `1if`, `1.real`, `1..real`, `0x1for`: not one plain literal.
  if (i < code.size() && (IsNameByte(code[i]) || code[i] == '.')) return std::string_view::npos;
  return i;
}

}  // namespace

bool ScanPlainExpressions(std::string_view code, std::vector<std::string_view>* names) {
  int depth = 0;
  // The last token was an operator (or `and`, `not`, ...) still waiting for
  // its operand: a statement cannot end there (`1 +` is refused, not left to
  // fail as a SyntaxError).
  bool dangling = false;
  std::size_t i = 0;
  auto at = [&](std::size_t k) { return k < code.size() ? code[k] : '\0'; };
  while (i < code.size()) {
    const char c = code[i];
    if (c == ' ' || c == '\t' || c == '\f' || c == '\r' || c == '\n') {
      if ((c == '\n' || c == '\r') && depth == 0 && dangling) return false;
      ++i;
      continue;
    }
    if (c == '#') {
      // A comment ends at either of CPython's line ends; a control byte in
      // it is refused rather than reasoned about.
      for (++i; i < code.size() && code[i] != '\n' && code[i] != '\r'; ++i) {
        const unsigned char b = static_cast<unsigned char>(code[i]);
        if ((b < 0x20 && b != '\t') || b == 0x7f) return false;
      }
      continue;
    }
    if (IsAsciiNameStart(c)) {
      std::size_t end = i;
      while (end < code.size() && IsAsciiNameChar(code[end])) ++end;
      if (end < code.size() && IsNonAsciiByte(code[end])) return false;
      std::string_view word = code.substr(i, end - i);
      if (OtherKeyword(word)) return false;
      const bool keyword = ExpressionKeyword(word);
      if (!keyword) names->push_back(word);
      dangling = keyword && word != "None" && word != "True" && word != "False";
      i = end;
      continue;
    }
    if (IsAsciiDigit(c)) {
      i = NumberEnd(code, i);
      if (i == std::string_view::npos) return false;
      dangling = false;
      continue;
    }
    const char next = at(i + 1);
    // An operator, unless the case says otherwise.
    const bool was_dangling = dangling;
    dangling = true;
    switch (c) {
      case '(': case '[': case '{':
        ++depth;
        ++i;
        dangling = false;
        continue;
      case ')': case ']': case '}':
        if (--depth < 0) return false;
        ++i;
        dangling = false;
        continue;
      case ';':  // the end of a statement
        if (was_dangling) return false;
        ++i;
        dangling = false;
        continue;
      case ',':
        ++i;
        dangling = false;
        continue;
      case '~':
        ++i;
        continue;
      case ':':
        if (depth == 0 || next == '=') return false;  // a block, an annotation, `:=`
        ++i;
        continue;
      case '*': case '/': case '<': case '>':
        if (next == c) {  // ** // << >>, and not **= //= <<= >>=
          if (at(i + 2) == '=') return false;
          i += 2;
          continue;
        }
        if (next == '=') {
          if (c == '*' || c == '/') return false;  // *= /=
          i += 2;  // <= >=
          continue;
        }
        if (c == '<' && next == '>') return false;  // <> (a syntax error but for barry_as_FLUFL)
        ++i;
        continue;
      case '=': case '!':
        if (next != '=') return false;  // an assignment, `!` alone
        i += 2;  // == !=
        continue;
      case '+': case '%': case '&': case '|': case '^':
        if (next == '=') return false;  // += %= &= |= ^=
        ++i;
        continue;
      case '-':
        if (next == '=' || next == '>') return false;  // -= ->
        ++i;
        continue;
      default:
        return false;  // . @ quotes \ $ ? ` non-ASCII, control bytes
    }
  }
  return depth == 0 && !dangling;
}

}  // namespace dolsot
