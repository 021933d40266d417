// GuessSplit: a small lexer over a cell's bytes (strings, comments,
// brackets, line continuations) that guesses where its trailing expression
// starts. Whatever it guesses, CPython compiles (cell_runner.cc).
#include <Python.h>  // PY_VERSION_HEX: f-string quoting changed in 3.12

#include "embedded/split_guess.h"

#include "core/python_chars.h"

#include <cctype>
#include <string>

namespace dolsot {
namespace {

// How the first word of a logical line classifies it.
LastLine ClassifyFirstWord(std::string_view word) {
  static constexpr std::string_view kStatementWords[] = {
      "def",   "class",  "if",     "elif",   "else",     "for",    "while", "try",
      "except", "finally", "with", "return", "pass",     "break",  "continue",
      "raise", "import", "from",   "global", "nonlocal", "assert", "del",   "async"};
  static constexpr std::string_view kUnclearWords[] = {"match", "case", "type", "lambda",
                                                       "yield"};
  for (std::string_view w : kStatementWords) if (word == w) return LastLine::kStatement;
  for (std::string_view w : kUnclearWords) if (word == w) return LastLine::kUnclear;
  return LastLine::kExpression;
}

// Skips a string literal starting at code[i] (a quote); returns the offset
// after it, or npos when unterminated or when this scanner cannot follow it.
std::size_t SkipString(std::string_view code, std::size_t i, bool is_fstring) {
#if PY_VERSION_HEX >= 0x030C0000
  if (is_fstring) return std::string_view::npos;  // PEP 701: nested quotes
#else
  (void)is_fstring;
#endif
  const char quote = code[i];
  const bool triple = code.substr(i, 3) == std::string(3, quote);
  i += triple ? 3 : 1;
  while (i < code.size()) {
    char c = code[i];
    if (c == '\\') {
      i += 2;
    } else if (triple && code.substr(i, 3) == std::string(3, quote)) {
      return i + 3;
    } else if (!triple && c == quote) {
      return i + 1;
    } else if (!triple && c == '\n') {
      return std::string_view::npos;
    } else {
      ++i;
    }
  }
  return std::string_view::npos;
}

// Classifies an '=' at bracket depth 0 (code[i] == '='); sets `skip` to how
// many bytes the operator spans.
LastLine ClassifyEquals(std::string_view code, std::size_t i, std::size_t& skip) {
  skip = 1;
  const char next = i + 1 < code.size() ? code[i + 1] : '\0';
  const char prev = i > 0 ? code[i - 1] : '\0';
  const char prev2 = i > 1 ? code[i - 2] : '\0';
  if (next == '=') {
    skip = 2;
    return LastLine::kExpression;  // ==
  }
  if (prev == ':') return LastLine::kUnclear;  // a bare walrus
  if ((prev == '<' || prev == '>') && prev2 != prev) return LastLine::kExpression;  // <= >=
  if (prev == '!') return LastLine::kExpression;
  return LastLine::kStatement;  // =, augmented assignment
}

}  // namespace

SplitGuess GuessSplit(std::string_view code) {
  SplitGuess guess;
  LastLine kind = LastLine::kUnclear;
  bool seen_line = false;
  bool line_open = false;  // inside a logical line
  int depth = 0;
  std::size_t i = 0;
  while (i < code.size()) {
    const unsigned char c = static_cast<unsigned char>(code[i]);
    if (!line_open) {  // at the start of a physical line outside any logical line
      std::size_t start = i;
      while (i < code.size() && (code[i] == ' ' || code[i] == '\t' || code[i] == '\f' || code[i] == '\r')) ++i;
      if (i >= code.size()) break;
      if (code[i] == '#') {
        while (i < code.size() && code[i] != '\n') ++i;
        continue;
      }
      if (code[i] == '\n') {
        ++i;
        continue;
      }
      if (code[i] == '\\') return guess;  // a continuation starting a line: unclear
      guess.has_prefix = seen_line;
      seen_line = line_open = true;
      guess.offset = i;
      kind = i != start ? LastLine::kStatement : LastLine::kExpression;  // indented: in a block
      if (code[i] == '@') kind = LastLine::kStatement;
      std::size_t end = i;
      while (end < code.size() && IsNameByte(code[end])) ++end;
      if (end > i && kind == LastLine::kExpression) kind = ClassifyFirstWord(code.substr(i, end - i));
      continue;
    }
    if (c == '\n') {
      if (depth == 0) line_open = false;
      ++i;
    } else if (c == '#') {
      while (i < code.size() && code[i] != '\n') ++i;
    } else if (c == '\\') {
      if (i + 1 < code.size() && code[i + 1] == '\n') i += 2;
      else if (code.substr(i + 1, 2) == "\r\n") i += 3;
      else return guess;
    } else if (c == '\'' || c == '"') {
      std::size_t p = i;
      bool fstring = false;
      while (p > 0 && IsNameByte(code[p - 1])) {
        --p;
        fstring = fstring || code[p] == 'f' || code[p] == 'F';
      }
      i = SkipString(code, i, fstring);
      if (i == std::string_view::npos) return SplitGuess{};
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
      ++i;
    } else if (c == ')' || c == ']' || c == '}') {
      if (--depth < 0) return SplitGuess{};
      ++i;
    } else if (depth == 0 && (c == ';' || c == ':' || c == '=')) {
      std::size_t skip = 1;
      LastLine found = c == ';' ? LastLine::kUnclear
                       : c == ':' ? (i + 1 < code.size() && code[i + 1] == '=' ? LastLine::kUnclear
                                                                                : LastLine::kStatement)
                                  : ClassifyEquals(code, i, skip);
      if (kind == LastLine::kExpression || found == LastLine::kUnclear) {
        if (found != LastLine::kExpression) kind = found;
      }
      i += skip;
    } else if (IsNameByte(static_cast<char>(c))) {
      std::size_t end = i;
      while (end < code.size() && IsNameByte(code[end])) ++end;
      if (depth == 0 && code.substr(i, end - i) == "lambda") kind = LastLine::kUnclear;
      i = end;
    } else {
      ++i;
    }
  }
  if (depth != 0 || !seen_line) return SplitGuess{};
  guess.kind = kind;
  return guess;
}

}  // namespace dolsot
