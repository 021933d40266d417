// The fast path's lexer (see prescan_lexer.h): Python's lexical grammar,
// giving up (Run() == false) on what 3.10-3.13 or tree-sitter may read differently.
#include "sandbox/prescan_lexer.h"

#include <string>

#include "core/python_chars.h"
#include "core/python_names.h"

namespace dolsot::sandbox::prescan {
namespace {

// CPython refuses more than 200 nested brackets (tokenizer MAXLEVEL) and 100
// indentation levels (MAXINDENT): beyond that the full path decides.
constexpr std::size_t kMaxBrackets = 200;
constexpr std::size_t kMaxIndents = 100;

// Operators, longest first.
constexpr std::string_view kOperators3[] = {"**=", "//=", ">>=", "<<=", "..."};
constexpr std::string_view kOperators2[] = {"**", "//", ">>", "<<", "<=", ">=", "==", "!=",
                                            "->", ":=", "+=", "-=", "*=", "/=", "%=", "@=",
                                            "&=", "|=", "^="};
constexpr std::string_view kOperators1 = "+-*/%@&|^~<>()[]{},:;.=";

}  // namespace

bool IsKeyword(std::string_view name) {
  return IsPythonKeyword(name) && name != "True" && name != "False" && name != "None";
}

// Compound statements: their header needs a `:` outside brackets. Checking
// this catches the commonest syntax error (a missing colon) on the fast path.
bool IsCompoundKeyword(std::string_view word) {
  static constexpr std::string_view kWords[] = {"async", "class", "def",    "elif", "else",
                                                "except", "finally", "for", "if",   "try",
                                                "while", "with"};
  return std::find(std::begin(kWords), std::end(kWords), word) != std::end(kWords);
}

void Lexer::Emit(Tok type, std::size_t start, std::size_t end) {
  tokens.push_back(Token{type, load_only_depth_ > 0, module_scope_,
                         code_.substr(start, end - start)});
  max_line_tokens = std::max(max_line_tokens, ++line_tokens_);
  if (line_tokens_ > line_token_limit_) too_long_ = true;
}

// At the first character of a physical line outside brackets: skips blank and
// comment lines, measures the indentation of a logical line's start.
bool Lexer::LogicalLineStart() {
  while (pos_ < code_.size()) {
    std::size_t start = pos_;
    bool odd_space = false;
    while (pos_ < code_.size() && (code_[pos_] == ' ' || code_[pos_] == '\t' || code_[pos_] == '\f')) {
      odd_space = odd_space || code_[pos_] != ' ';
      ++pos_;
    }
    char c = At(pos_);
    if (c == '#') {
      SkipComment();
      c = At(pos_);
    }
    if (c == '\r' && At(pos_ + 1) == '\n') c = At(++pos_);
    if (c == '\n') {
      ++pos_;
      continue;
    }
    if (pos_ >= code_.size()) return true;
    // Tabs and form feeds make CPython's indentation rules matter; a
    // backslash before the first token joins lines in ways not worth following.
    if (odd_space || c == '\\') return false;
    line_indent_ = pos_ - start;
    while (!indents_.empty() && indents_.back() > line_indent_) indents_.pop_back();
    if (line_indent_ > 0 && (indents_.empty() || indents_.back() < line_indent_)) {
      indents_.push_back(line_indent_);
    }
    if (indents_.size() > kMaxIndents) return false;
    max_indents = std::max(max_indents, indents_.size());
    while (!headers_.empty() && headers_.back() >= line_indent_) headers_.pop_back();
    module_scope_ = headers_.empty();
    line_tokens_ = 0;
    line_first_ = tokens.size();
    line_colon_ = false;
    return true;
  }
  return true;
}

// Operators a valid logical line may end with, or start with. A line that
// ends or starts with any other (`d.` then `_x` on the next line) is a syntax
// error to CPython, but tree-sitter may read on across the line break (as
// `d._x`), so the full path would judge other code than the fast path.
bool CanEndLine(std::string_view op) {
  return op == ")" || op == "]" || op == "}" || op == "," || op == ":" || op == ";" || op == "...";
}
bool CanStartLine(std::string_view op) {
  return op == "(" || op == "[" || op == "{" || op == "-" || op == "+" || op == "~" ||
         op == "*" || op == "@" || op == "...";
}

// `as` binds a name only in a line that starts with `with`, `async with`,
// `except`, `import` or `from` (and `case`, which takes the full path
// anyway). Anywhere else CPython refuses the line, but tree-sitter may read
// an `as` pattern that binds a name (`x in s as y\` then `. z in set` binds
// `set`), so the full path would judge other code than the fast path.
bool Lexer::AsMayStand(std::string_view first) const {
  if (first == "with" || first == "except" || first == "import" || first == "from") return true;
  if (first == "async" && line_first_ + 1 < tokens.size() &&
      tokens[line_first_ + 1].text == "with") {
    return true;
  }
  for (std::size_t i = line_first_; i < tokens.size(); ++i) {
    if (tokens[i].type == Tok::kName && tokens[i].text == "as") return false;
  }
  return true;
}

bool Lexer::EndLogicalLine() {
  if (line_tokens_ == 0) return true;
  std::string_view first = tokens[line_first_].text;
  if ((tokens.back().type == Tok::kOp && !CanEndLine(tokens.back().text)) ||
      (tokens[line_first_].type == Tok::kOp && !CanStartLine(first))) {
    return false;
  }
  if (tokens[line_first_].type == Tok::kName && IsCompoundKeyword(first) && !line_colon_) {
    return false;
  }
  if (!AsMayStand(first)) return false;
  bool header = tokens[line_first_].type == Tok::kName &&
                (first == "def" || first == "class" ||
                 (first == "async" && line_first_ + 1 < tokens.size() &&
                  tokens[line_first_ + 1].text == "def"));
  if (header) headers_.push_back(line_indent_);
  Emit(Tok::kNewline, pos_, pos_);
  line_tokens_ = 0;
  return true;
}

bool Lexer::Run() {
  if (!LogicalLineStart()) return false;
  while (pos_ < code_.size()) {
    char c = code_[pos_];
    if (c == ' ' || c == '\t') {
      ++pos_;
    } else if (c == '#') {
      SkipComment();
    } else if (c == '\\') {
      if (At(pos_ + 1) == '\n') {
        pos_ += 2;
      } else if (At(pos_ + 1) == '\r' && At(pos_ + 2) == '\n') {
        pos_ += 3;
      } else {
        return false;
      }
      if (pos_ >= code_.size()) return false;  // a continuation into the end of input
      // A continuation into a blank or comment-only line: CPython ends the
      // logical line there (a syntax error), but tree-sitter joins the lines
      // across it, so the two paths would read different tokens.
      std::size_t next = pos_;
      while (next < code_.size() && (code_[next] == ' ' || code_[next] == '\t' || code_[next] == '\f')) {
        ++next;
      }
      char after = At(next);
      if (next >= code_.size() || after == '\n' || after == '\r' || after == '#') return false;
    } else if (c == '\n' || (c == '\r' && At(pos_ + 1) == '\n')) {
      pos_ += c == '\r' ? 2 : 1;
      if (brackets_.empty()) {
        if (!EndLogicalLine() || !LogicalLineStart()) return false;
      }
    } else if (!LexToken() || too_long_) {
      return false;
    }
  }
  if (!brackets_.empty() || !EndLogicalLine()) return false;
  Emit(Tok::kEnd, pos_, pos_);
  return true;
}

bool Lexer::PrevIsAtom() const {
  if (tokens.empty()) return false;
  const Token& prev = tokens.back();
  switch (prev.type) {
    case Tok::kName:
      return !IsKeyword(prev.text);
    case Tok::kNumber:
    case Tok::kString:
    case Tok::kStringEnd:
      return true;
    case Tok::kOp:
      return prev.text == ")" || prev.text == "]" || prev.text == "}";
    default:
      return false;
  }
}

bool Lexer::LexToken() {
  char c = code_[pos_];
  std::size_t start = pos_;
  if (IsAsciiNameStart(c)) {
    while (IsAsciiNameChar(At(pos_))) ++pos_;
    char next = At(pos_);
    if (IsNonAsciiByte(next)) return false;  // a non-ASCII identifier
    if (next == '\'' || next == '"') return LexString(start, code_.substr(start, pos_ - start));
    Emit(Tok::kName, start, pos_);
    return true;
  }
  if (IsAsciiDigit(c) || (c == '.' && IsAsciiDigit(At(pos_ + 1)))) return LexNumber();
  if (c == '\'' || c == '"') return LexString(start, {});
  return LexOperator();
}

bool Lexer::LexNumber() {
  std::size_t start = pos_;
  char c1 = At(pos_ + 1);
  if (code_[pos_] == '0' && (c1 == 'x' || c1 == 'X' || c1 == 'o' || c1 == 'O' || c1 == 'b' ||
                             c1 == 'B')) {
    pos_ += 2;
    while (IsAsciiHexDigit(At(pos_)) || At(pos_) == '_') ++pos_;
  } else {
    while (IsAsciiDigit(At(pos_)) || At(pos_) == '_') ++pos_;
    if (At(pos_) == '.') {
      ++pos_;
      while (IsAsciiDigit(At(pos_)) || At(pos_) == '_') ++pos_;
    }
    if (At(pos_) == 'e' || At(pos_) == 'E') {
      std::size_t sign = (At(pos_ + 1) == '+' || At(pos_ + 1) == '-') ? 1 : 0;
      if (IsAsciiDigit(At(pos_ + 1 + sign))) {
        pos_ += 1 + sign;
        while (IsAsciiDigit(At(pos_)) || At(pos_) == '_') ++pos_;
      }
    }
    if (At(pos_) == 'j' || At(pos_) == 'J') ++pos_;
  }
  // `1if`, `0x1for`, `1.real`: CPython's reading depends on its version.
  char next = At(pos_);
  if (IsNameByte(next) || next == '.') return false;
  Emit(Tok::kNumber, start, pos_);
  return true;
}

bool Lexer::LexOperator() {
  std::size_t start = pos_;
  std::string_view rest = code_.substr(pos_);
  char c = code_[pos_];
  for (std::string_view op : kOperators3) {
    if (op[0] == c && rest.starts_with(op)) {
      pos_ += 3;
      Emit(Tok::kOp, start, pos_);
      return true;
    }
  }
  for (std::string_view op : kOperators2) {
    if (op[0] == c && rest.starts_with(op)) {
      pos_ += 2;
      Emit(Tok::kOp, start, pos_);
      return true;
    }
  }
  if (kOperators1.find(c) == std::string_view::npos) return false;  // `!`, `$`, `?`, controls, ...
  if (c == '(' || c == '[' || c == '{') {
    if (brackets_.size() >= kMaxBrackets) return false;
    bool load_only = c == '{' || PrevIsAtom();  // a call, a subscript, or braces
    ++pos_;
    Emit(Tok::kOp, start, pos_);
    brackets_.push_back(Bracket{c == '(' ? ')' : c == '[' ? ']' : '}', load_only, false});
    if (load_only) ++load_only_depth_;
    return true;
  }
  if (c == ')' || c == ']' || c == '}') {
    if (brackets_.empty() || brackets_.back().field || brackets_.back().close != c) return false;
    if (brackets_.back().load_only) --load_only_depth_;
    brackets_.pop_back();
  }
  if (c == ':' && brackets_.empty()) line_colon_ = true;
  ++pos_;
  Emit(Tok::kOp, start, pos_);
  return true;
}

bool Lexer::LexString(std::size_t start, std::string_view prefix) {
  std::string lower(prefix);
  for (char& ch : lower) ch = static_cast<char>(ch | 0x20);
  bool fstring = lower == "f" || lower == "fr" || lower == "rf";
  bool plain = lower.empty() || lower == "r" || lower == "u" || lower == "b" ||
               lower == "br" || lower == "rb";
  if (!fstring && !plain) return false;  // t-strings, or a name glued to a string
  char quote = code_[pos_];
  if (InFieldQuote(quote)) return false;  // PEP 701 reads it, 3.11 does not
  bool triple = At(pos_ + 1) == quote && At(pos_ + 2) == quote;
  pos_ += triple ? 3 : 1;
  if (!fstring) {
    if (!LexPlainBody(quote, triple)) return false;
    Emit(Tok::kString, start, pos_);
    return true;
  }
  Emit(Tok::kString, start, pos_);
  fquotes_.push_back(quote);
  if (!LexFStringBody(quote, triple, lower != "f")) return false;
  fquotes_.pop_back();
  Emit(Tok::kStringEnd, pos_, pos_);
  return true;
}

bool Lexer::LexPlainBody(char quote, bool triple) {
  while (pos_ < code_.size()) {
    char c = code_[pos_];
    if (fields_ > 0 && (c == '\\' || c == '\n' || c == '\r' || InFieldQuote(c))) return false;
    if (c == '\\') {
      pos_ += (At(pos_ + 1) == '\r' && At(pos_ + 2) == '\n') ? 3 : 2;
    } else if (c == quote && (!triple || (At(pos_ + 1) == quote && At(pos_ + 2) == quote))) {
      pos_ += triple ? 3 : 1;
      return true;
    } else if (c == '\n' && !triple) {
      return false;  // unterminated
    } else {
      ++pos_;
    }
  }
  return false;
}

bool Lexer::LexFStringBody(char quote, bool triple, bool raw) {
  while (pos_ < code_.size()) {
    char c = code_[pos_];
    if (c == quote && (!triple || (At(pos_ + 1) == quote && At(pos_ + 2) == quote))) {
      pos_ += triple ? 3 : 1;
      return true;
    }
    if (fields_ > 0 && (c == '\\' || c == '\n' || c == '\r' || InFieldQuote(c))) return false;
    if (c == '\\') {
      char e = At(pos_ + 1);
      if (e == '{' || e == '}' || (!raw && e == 'N')) return false;
      pos_ += (e == '\r' && At(pos_ + 2) == '\n') ? 3 : 2;
    } else if (c == '{' && At(pos_ + 1) == '{') {
      pos_ += 2;
    } else if (c == '}' && At(pos_ + 1) == '}') {
      pos_ += 2;
    } else if (c == '{') {
      if (!LexField()) return false;
    } else if (c == '}') {
      return false;
    } else if (c == '\n' && !triple) {
      return false;
    } else {
      ++pos_;
    }
  }
  return false;
}

// A replacement field at `{`: its expression becomes tokens (load-only), the
// conversion and the format spec (with its nested fields) are read over.
bool Lexer::LexField() {
  if (brackets_.size() >= kMaxBrackets) return false;
  brackets_.push_back(Bracket{'}', true, true});
  ++load_only_depth_;
  ++fields_;
  Emit(Tok::kFieldOpen, pos_, pos_ + 1);
  ++pos_;
  char stop = '\0';
  while (stop == '\0') {
    if (pos_ >= code_.size()) return false;
    char c = code_[pos_];
    if (c == ' ' || c == '\t') {
      ++pos_;
    } else if (c == '\n' || c == '\r' || c == '\\' || c == '#' || c == '\f') {
      return false;  // each is read differently before and after PEP 701
    } else if (brackets_.back().field &&
               (c == '}' || c == ':' || (c == '!' && At(pos_ + 1) != '='))) {
      stop = c;
    } else if (!LexToken()) {
      return false;
    }
  }
  if (stop == '!') {
    ++pos_;
    char conversion = At(pos_);
    if (conversion != 'r' && conversion != 's' && conversion != 'a') return false;
    stop = At(++pos_);
    if (stop != ':' && stop != '}') return false;
  }
  if (stop == ':') {
    ++pos_;
    while (true) {
      if (pos_ >= code_.size()) return false;
      char c = code_[pos_];
      if (c == '}') break;
      if (c == '{') {
        if (At(pos_ + 1) == '{' || !LexField()) return false;
        continue;
      }
      if (c == '\\' || c == '\n' || c == '\r' || InFieldQuote(c)) return false;
      ++pos_;
    }
  }
  // code_[pos_] == '}'
  brackets_.pop_back();
  --load_only_depth_;
  --fields_;
  Emit(Tok::kFieldClose, pos_, pos_ + 1);
  ++pos_;
  return true;
}

}  // namespace dolsot::sandbox::prescan
