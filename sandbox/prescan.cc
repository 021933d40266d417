// The gate's fast path (see prescan.h and docs/gate.md, "The fast path").
//
// Two steps. The lexer follows Python's lexical grammar closely enough to
// find every name CPython will see, with the bracket context and the scope of
// its logical line; whatever it is not sure to read as CPython does (non-ASCII
// outside strings and comments, unknown string prefixes, backslashes or quotes
// inside f-string fields, numbers glued to names, tabs in indentation, ...)
// ends the fast path. The analysis then looks at each name with its
// neighbours and answers "allowed" only when no rule of the full gate could
// fire; anything it cannot rule out ends the fast path too.
#include "sandbox/prescan.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/python_chars.h"
#include "core/python_names.h"
#include "sandbox/rules.h"

namespace dolsot::sandbox {
namespace {

// CPython refuses more than 200 nested brackets (tokenizer MAXLEVEL) and 100
// indentation levels (MAXINDENT): beyond that the full path decides.
constexpr std::size_t kMaxBrackets = 200;
constexpr std::size_t kMaxIndents = 100;

enum class Tok : std::uint8_t {
  kName,        // identifiers and keywords
  kNumber,
  kString,      // a whole plain string, or the start of an f-string
  kStringEnd,   // the end of an f-string (after its fields)
  kFieldOpen,   // `{` of an f-string replacement field
  kFieldClose,  // its `}`
  kOp,          // operators and brackets
  kNewline,     // the end of a logical line
  kEnd,
};

struct Token {
  Tok type = Tok::kEnd;
  // Inside a call/subscript trailer, braces, or an f-string field: no target
  // there except a comprehension's for-target (left to TargetsAreNameChains).
  bool load_only = false;
  bool module_scope = true;   // its logical line is not inside a def/class body
  std::string_view text;
};

// Hard keywords but the three constants: a bracket after one of them opens a
// display, not a trailer (`True[0]` is a subscript, however odd).
bool IsKeyword(std::string_view name) {
  return IsPythonKeyword(name) && name != "True" && name != "False" && name != "None";
}

// Operators, longest first.
constexpr std::string_view kOperators3[] = {"**=", "//=", ">>=", "<<=", "..."};
constexpr std::string_view kOperators2[] = {"**", "//", ">>", "<<", "<=", ">=", "==", "!=",
                                            "->", ":=", "+=", "-=", "*=", "/=", "%=", "@=",
                                            "&=", "|=", "^="};
constexpr std::string_view kOperators1 = "+-*/%@&|^~<>()[]{},:;.=";

class Lexer {
 public:
  Lexer(std::string_view code, std::size_t max_line_tokens)
      : code_(code), line_token_limit_(max_line_tokens) {}

  // False when the cell is not surely read as CPython reads it.
  bool Run();

  std::vector<Token> tokens;
  std::size_t max_line_tokens = 0;
  std::size_t max_indents = 0;

 private:
  struct Bracket {
    char close;
    bool load_only;
    bool field;  // an f-string replacement field
  };

  char At(std::size_t i) const { return i < code_.size() ? code_[i] : '\0'; }
  // To the end of the line; CPython also ends a comment at a lone CR, after
  // which the lexer gives up (CheckSourceText rejects it anyway).
  void SkipComment() {
    while (pos_ < code_.size() && code_[pos_] != '\n' && code_[pos_] != '\r') ++pos_;
  }
  void Emit(Tok type, std::size_t start, std::size_t end);
  bool LogicalLineStart();
  bool EndLogicalLine();
  bool AsMayStand(std::string_view first) const;
  bool LexToken();
  bool LexNumber();
  bool LexOperator();
  bool LexString(std::size_t start, std::string_view prefix);
  bool LexPlainBody(char quote, bool triple);
  bool LexFStringBody(char quote, bool triple, bool raw);
  bool LexField();
  bool InFieldQuote(char c) const {
    return std::find(fquotes_.begin(), fquotes_.end(), c) != fquotes_.end();
  }
  bool PrevIsAtom() const;

  std::string_view code_;
  std::size_t line_token_limit_;  // more tokens in a logical line: give up early
  std::size_t pos_ = 0;
  std::vector<Bracket> brackets_;
  std::size_t load_only_depth_ = 0;  // load-only brackets open
  std::size_t fields_ = 0;           // f-string fields open
  std::vector<char> fquotes_;        // quote chars of the open f-strings
  std::vector<std::size_t> indents_;  // CPython's indentation stack (without 0)
  std::vector<std::size_t> headers_;  // indentation of open def/class headers
  bool module_scope_ = true;
  std::size_t line_indent_ = 0;
  std::size_t line_tokens_ = 0;
  std::size_t line_first_ = 0;  // index of the logical line's first token
  bool line_colon_ = false;     // a `:` outside brackets in this logical line
  bool too_long_ = false;       // a logical line passed line_token_limit_
};

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

// ---------------------------------------------------------------------------
// The analysis over the tokens.

bool IsOp(const Token& t, std::string_view op) { return t.type == Tok::kOp && t.text == op; }
bool IsName(const Token& t, std::string_view name) {
  return t.type == Tok::kName && t.text == name;
}

bool IsAssignOp(const Token& t) {
  if (t.type != Tok::kOp) return false;
  static constexpr std::string_view kAssign[] = {"=",  "+=", "-=", "*=",  "/=",  "//=", "%=",
                                                 "@=", "&=", "|=", "^=", ">>=", "<<=", "**="};
  return std::find(std::begin(kAssign), std::end(kAssign), t.text) != std::end(kAssign);
}

bool IsStatementEnd(const Token& t) {
  return t.type == Tok::kNewline || t.type == Tok::kEnd || IsOp(t, ";");
}

// A token that can follow the last name of an assignment, for, with, except,
// del or walrus target.
bool CanFollowTarget(const Token& t) {
  if (IsStatementEnd(t) || IsAssignOp(t) || IsName(t, "in")) return true;
  if (t.type != Tok::kOp) return false;
  return t.text == "," || t.text == ")" || t.text == "]" || t.text == "}" || t.text == ":" ||
         t.text == ":=";
}

// A token after which an expression, never a target, starts.
bool OnlyExpressionFollows(const Token& t) {
  static constexpr std::string_view kWords[] = {"return", "yield", "await", "if",  "elif",
                                                "while",  "assert", "raise", "not", "and",
                                                "or",     "is",     "in",    "else", "from"};
  static constexpr std::string_view kOps[] = {"+",  "-",  "/",  "//", "%",  "@",  "<<",
                                              ">>", "&",  "|",  "^",  "~",  "==", "!=",
                                              "<",  ">",  "<=", ">=", "->", "**"};
  if (t.type == Tok::kName) {
    return std::find(std::begin(kWords), std::end(kWords), t.text) != std::end(kWords);
  }
  if (t.type == Tok::kOp) return std::find(std::begin(kOps), std::end(kOps), t.text) != std::end(kOps);
  return false;
}

// Whether a name (or attribute chain) between `prev` and `next` may be a
// target that binds or stores, outside any load-only bracket.
bool MayBeTarget(const Token& prev, const Token& next) {
  if (!CanFollowTarget(next)) return false;
  if (OnlyExpressionFollows(prev)) return false;
  if (IsAssignOp(prev) && IsStatementEnd(next)) return false;  // the value of `x = name`
  if (prev.type == Tok::kNewline || IsOp(prev, ";")) {
    return !IsStatementEnd(next);  // a whole expression statement (`tb.config`) only reads
  }
  return true;
}

class Analysis {
 public:
  Analysis(const std::vector<Token>& tokens, const Policy& policy)
      : t_(tokens), policy_(policy) {}
  bool Run();

 private:
  bool Denied(std::string_view name) const {
    return IsAlwaysDeniedName(name) || policy_.denied_names.contains(name);
  }
  // The checks of CheckName: a read or bound name.
  bool NameOk(std::string_view name) const {
    return !Denied(name) && (!IsDunder(name) || policy_.allowed_dunders.contains(name));
  }
  // The checks of AttributeVerdict (plus the format-string rule).
  bool AttributeOk(std::string_view name) const {
    if ((IsAlwaysDeniedName(name) && !IsDeniedOnlyAsName(name)) ||
        policy_.denied_names.contains(name)) {
      return false;
    }
    if (IsInternalAttribute(name) || IsDeniedAttribute(name) || IsDeniedModuleLeaf(name)) {
      return false;
    }
    if (name == "format" || name == "format_map") return false;
    // Method dunders only through super() (CheckCell decides): give up.
    if (IsDunder(name)) return policy_.allowed_dunders.contains(name) && IsDataDunder(name);
    return !name.starts_with("_");
  }
  bool BindingOk(std::string_view bound, bool module_scope) const {
    if (!NameOk(bound) || policy_.toolbox_aliases.contains(bound)) return false;
    return !(module_scope && IsBuiltinName(bound));
  }
  bool Dotted(std::size_t& i, std::string& path, std::string_view& first);
  bool BindImported(std::size_t& i, std::string_view name, bool module_scope);
  bool Import(std::size_t& i);
  bool TargetsAreNameChains() const;
  bool AnnotationsHoldNoStrings() const;
  bool CallIsPlain(std::size_t open) const;
  std::size_t CloseOf(std::size_t open) const;

  const std::vector<Token>& t_;
  const Policy& policy_;
  std::vector<std::string_view> imported_;
  std::vector<std::string_view> store_roots_;
};

// `a.b.c` at t_[i] (checks every part); leaves i after it.
bool Analysis::Dotted(std::size_t& i, std::string& path, std::string_view& first) {
  if (t_[i].type != Tok::kName || IsKeyword(t_[i].text)) return false;
  first = t_[i].text;
  path = first;
  if (Denied(first)) return false;
  ++i;
  while (IsOp(t_[i], ".")) {
    if (t_[i + 1].type != Tok::kName || !AttributeOk(t_[i + 1].text)) return false;
    path += '.';
    path += t_[i + 1].text;
    i += 2;
  }
  return true;
}

// `[as NAME]` at t_[i] after an imported `name`: the name it binds (the alias,
// else `name`) must be free to bind; it is recorded as imported.
bool Analysis::BindImported(std::size_t& i, std::string_view name, bool module_scope) {
  std::string_view bound = name;
  if (IsName(t_[i], "as")) {
    if (t_[i + 1].type != Tok::kName) return false;
    bound = t_[i + 1].text;
    i += 2;
  }
  if (!BindingOk(bound, module_scope)) return false;
  imported_.push_back(bound);
  return true;
}

// An import statement at t_[i]; leaves i at its end (NEWLINE, `;` or END).
bool Analysis::Import(std::size_t& i) {
  bool module_scope = t_[i].module_scope;
  std::string path;
  std::string_view first;
  if (IsName(t_[i], "import")) {
    ++i;
    while (true) {
      if (!Dotted(i, path, first) || !policy_.IsModuleAllowed(path)) return false;
      if (!BindImported(i, first, module_scope)) return false;
      if (!IsOp(t_[i], ",")) break;
      ++i;
    }
    return IsStatementEnd(t_[i]);
  }
  ++i;  // from
  if (!Dotted(i, path, first) || !policy_.IsModuleAllowed(path)) return false;  // also `from .`
  if (!IsName(t_[i], "import")) return false;
  ++i;
  bool paren = IsOp(t_[i], "(");
  if (paren) ++i;
  while (true) {
    if (t_[i].type != Tok::kName || IsKeyword(t_[i].text)) return false;  // also `*`
    std::string_view name = t_[i].text;
    if (!AttributeOk(name)) return false;
    ++i;
    if (!BindImported(i, name, module_scope)) return false;
    if (!IsOp(t_[i], ",")) break;
    ++i;
    if (paren && IsOp(t_[i], ")")) break;
  }
  if (paren) {
    if (!IsOp(t_[i], ")")) return false;
    ++i;
  }
  return IsStatementEnd(t_[i]);
}

bool IsOpenBracket(const Token& t) {
  return t.type == Tok::kFieldOpen || IsOp(t, "(") || IsOp(t, "[") || IsOp(t, "{");
}
bool IsCloseBracket(const Token& t) {
  return t.type == Tok::kFieldClose || IsOp(t, ")") || IsOp(t, "]") || IsOp(t, "}");
}

// The store analysis in Run sees `name.attr` targets outside load-only
// brackets. Two other attribute targets are left to the full path here:
// - any `.` between a `for` and its `in` (a comprehension's for-target may
//   be an attribute, `sum(0 for math.pi in [1])`, inside any bracket);
// - `.attr` right after `)`, `]`, `}` or a string where a target may end
//   (`(math).pi = 1`, `del (math).pi`, `(tb or 0).x = 1`, `[math][0].pi = 1`),
//   outside load-only brackets. At a statement end that is a target only in `del`;
//   before the `:` of an if/elif/while/for/except header (`if f(x).ok:`)
//   only after an `as`.
// One linear pass.
bool Analysis::TargetsAreNameChains() const {
  std::size_t depth = 0;
  std::size_t for_depth = 0;  // bracket depth + 1 of the open for-target; 0: none
  bool del_statement = false;
  bool statement_start = true;
  bool header = false;   // an if/elif/while/for/except header: its `:` ends it
  bool as_seen = false;  // `with ... as` targets may end at `:`
  for (std::size_t i = 0; i + 1 < t_.size(); ++i) {
    const Token& tok = t_[i];
    if (IsStatementEnd(tok) || (depth == 0 && IsOp(tok, ":"))) {
      del_statement = header = as_seen = false;
      statement_start = true;
      for_depth = 0;
      if (tok.type == Tok::kNewline) depth = 0;  // no NEWLINE inside brackets
      continue;
    }
    if (statement_start) {
      static constexpr std::string_view kHeaders[] = {"if", "elif", "while", "for", "except"};
      header = tok.type == Tok::kName &&
               std::find(std::begin(kHeaders), std::end(kHeaders), tok.text) != std::end(kHeaders);
      statement_start = false;
    }
    if (IsName(tok, "as")) as_seen = true;
    if (IsOpenBracket(tok)) {
      ++depth;
    } else if (IsCloseBracket(tok)) {
      if (depth > 0) --depth;
      if (for_depth > depth + 1) for_depth = 0;  // its bracket closed: no `in`
    }
    // The end of an object that is not a name: a bracket, a display, a
    // string (an f-string's fields may name the toolbox).
    bool object_end = IsOp(tok, ")") || IsOp(tok, "]") || IsOp(tok, "}") ||
                      tok.type == Tok::kString || tok.type == Tok::kStringEnd;
    if (object_end && IsOp(t_[i + 1], ".") && !t_[i + 1].load_only) {
      std::size_t j = i + 1;
      while (IsOp(t_[j], ".") && t_[j + 1].type == Tok::kName) j += 2;
      bool may_end_target = IsStatementEnd(t_[j]) ? del_statement
                            : IsOp(t_[j], ":")   ? !header || as_seen
                                                 : CanFollowTarget(t_[j]);
      if (may_end_target) return false;
    }
    if (tok.type == Tok::kName) {
      if (tok.text == "del") del_statement = true;
      if (tok.text == "for" && for_depth == 0) for_depth = depth + 1;
      if (tok.text == "in" && for_depth == depth + 1) for_depth = 0;
    } else if ((IsOp(tok, ".") || IsOp(tok, "[")) && for_depth != 0) {
      return false;  // an attribute or subscript for-target
    }
  }
  return true;
}

// The full path checks strings in annotations (construct-denied). A logical
// line that may hold an annotation and holds a string gives up: a `def` line,
// a line with `->`, a `:` outside call/subscript brackets and braces in a
// simple statement, or a second such `:` in a compound statement's line.
bool Analysis::AnnotationsHoldNoStrings() const {
  std::size_t start = 0;
  for (std::size_t i = 0; i < t_.size(); ++i) {
    if (t_[i].type != Tok::kNewline && t_[i].type != Tok::kEnd) continue;
    const Token& first = t_[start];
    bool compound = first.type == Tok::kName && IsCompoundKeyword(first.text);
    bool maybe = IsName(first, "def") || IsName(first, "async");
    bool string = false;
    std::size_t colons = 0;
    for (std::size_t j = start; j < i; ++j) {
      string = string || t_[j].type == Tok::kString;
      if (IsOp(t_[j], "->")) maybe = true;
      if (IsOp(t_[j], ":") && !t_[j].load_only) ++colons;
    }
    if (colons > (compound ? 1u : 0u)) maybe = true;
    if (maybe && string) return false;
    start = i + 1;
  }
  return true;
}

// `type(x)` with one plain argument (the full path refuses more).
bool Analysis::CallIsPlain(std::size_t open) const {
  std::size_t depth = 0;
  for (std::size_t j = open; j < t_.size(); ++j) {
    if (IsOpenBracket(t_[j])) ++depth;
    if (IsCloseBracket(t_[j]) && --depth == 0) return j > open + 1;
    if (depth == 1 && (IsOp(t_[j], ",") || IsOp(t_[j], "*") || IsOp(t_[j], "**") ||
                       IsOp(t_[j], "="))) {
      return false;
    }
    if (t_[j].type == Tok::kEnd) return false;
  }
  return false;
}

// The index of the bracket that closes t_[open] (the kEnd token if none).
std::size_t Analysis::CloseOf(std::size_t open) const {
  std::size_t depth = 0;
  for (std::size_t j = open; j < t_.size(); ++j) {
    if (IsOpenBracket(t_[j])) ++depth;
    if (IsCloseBracket(t_[j]) && --depth == 0) return j;
    if (t_[j].type == Tok::kEnd) return j;
  }
  return t_.size() - 1;
}

bool Analysis::Run() {
  if (!TargetsAreNameChains() || !AnnotationsHoldNoStrings()) return false;
  // A caught exception's payload (`e.args`, `s.value`) is decided by the full
  // path from the whole cell: give up when both could be there.
  bool catches = false, carrier = false;
  static const Token kStart{Tok::kNewline, false, true, {}};
  for (std::size_t i = 0; i < t_.size(); ++i) {
    const Token& tok = t_[i];
    if (tok.type != Tok::kName) continue;
    const Token& prev = i > 0 ? t_[i - 1] : kStart;
    const Token& next = t_[i + 1];  // the last token is kEnd, never a name
    std::string_view name = tok.text;
    bool statement_start = prev.type == Tok::kNewline || IsOp(prev, ";");
    bool clause_start = statement_start || IsOp(prev, ":");
    if (statement_start && (name == "import" || name == "from")) {
      if (!Import(i)) return false;
      continue;
    }
    if (name == "import" || name == "global" || name == "nonlocal") return false;
    // Left to the full path: except*, ExceptionGroup subclasses, classes
    // made from data (type() with more arguments, the Enum functional API).
    if (name == "except" && IsOp(next, "*")) return false;
    if (name == "ExceptionGroup" || name == "BaseExceptionGroup") return false;
    if (IsOp(next, "(") && (name == "Enum" || name == "IntEnum" || name == "StrEnum" ||
                            name == "Flag" || name == "IntFlag" || name == "ReprEnum")) {
      return false;
    }
    if (name == "type" && IsOp(next, "(") && !IsOp(prev, ".") && !CallIsPlain(i + 1)) {
      return false;
    }
    // `type` as a value, `type(x)(...)`, class bases, deepcopy with a memo or
    // as a value, stores into split/derive/subgroup: left to the full path.
    if (name == "type" && !IsOp(prev, ".") && !IsOp(next, "(") && !IsOp(next, "=")) return false;
    if (name == "type" && IsOp(next, "(") && !IsOp(prev, ".")) {
      // `type(x)` used in place: an attribute or `is` (else the full path
      // decides; `==` may run the other operand's __eq__ with the class).
      std::size_t close = CloseOf(i + 1);
      if (close + 1 >= t_.size()) return false;
      const Token& after = t_[close + 1];
      if (!IsOp(after, ".") && !IsName(after, "is")) return false;
    }
    if (name == "class" && next.type == Tok::kName && IsOp(t_[i + 2], "(")) return false;
    if (name == "deepcopy" && (!IsOp(next, "(") || !CallIsPlain(i + 1))) return false;
    if (IsOp(prev, ".") && !IsOp(next, "(") &&
        (name == "split" || name == "derive" || name == "subgroup")) {
      return false;
    }
    if (name == "except" || name == "__exit__" || name == "__aexit__") catches = true;
    if (IsOp(prev, ".") && IsExceptionCarrier(name)) carrier = true;
    // Soft keywords: match/case statements and `type X = ...` aliases.
    if (clause_start && (name == "match" || name == "case")) return false;
    if (clause_start && name == "type" && next.type == Tok::kName) return false;
    if (IsOp(prev, ".")) {
      if (!AttributeOk(name)) return false;
      continue;
    }
    if (!NameOk(name)) return false;
    // tree-sitter reads `print >> f` / `print "x"` as Python 2 statements.
    if (name == "print" && clause_start && !IsOp(next, "(")) return false;
    bool keyword_constant = name == "True" || name == "False" || name == "None";
    // `class False:` / `def None():` (CPython: a syntax error; tree-sitter: a
    // definition binding that name, which the full path refuses).
    if (keyword_constant && (IsName(prev, "def") || IsName(prev, "class"))) return false;
    bool guarded = (IsBuiltinName(name) && !keyword_constant) ||
                   policy_.toolbox_aliases.contains(name);
    if (guarded) {
      if (IsOp(next, ":=")) return false;
      if (tok.module_scope && (IsName(prev, "def") || IsName(prev, "class"))) return false;
      if (tok.module_scope && !tok.load_only && MayBeTarget(prev, next)) return false;
    }
    if (IsOp(next, ".") || IsOp(next, "[")) {  // name.a.b followed by what?
      std::size_t j = i + 1;
      while (IsOp(t_[j], ".") && t_[j + 1].type == Tok::kName) j += 2;
      // A mutating method on what a module holds (`m.table.update(...)`),
      // anywhere; a subscript of it (`m.table[k] = v`) or a store outside
      // load-only brackets.
      bool mutation = j > i + 1 && IsOp(t_[j], "(") && IsMutatingMethod(t_[j - 1].text);
      bool subscript = !tok.load_only && IsOp(t_[j], "[");
      bool store = !tok.load_only && IsOp(next, ".") && MayBeTarget(prev, t_[j]);
      if (mutation || subscript || store) store_roots_.push_back(name);
    }
  }
  if (catches && carrier) return false;
  std::sort(imported_.begin(), imported_.end());  // n log n, also for huge cells
  for (std::string_view root : store_roots_) {
    if (policy_.toolbox_aliases.contains(root) || policy_.allowed_modules.contains(root) ||
        std::binary_search(imported_.begin(), imported_.end(), root)) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool PrescanProvesAllowed(std::string_view code, const Policy& policy) {
  // The tree-sitter tree is at most a few levels per token of a logical line
  // and two per indentation level; the full path rejects deeper trees. A line
  // that alone breaks the bound ends the lexing early (and bounds memory).
  if (policy.max_depth < 32) return false;
  Lexer lexer(code, (policy.max_depth - 32) / 3);
  if (!lexer.Run()) return false;
  std::size_t depth_bound = 3 * lexer.max_line_tokens + 3 * lexer.max_indents + 32;
  if (depth_bound > policy.max_depth) return false;
  return Analysis(lexer.tokens, policy).Run();
}

}  // namespace dolsot::sandbox
