// The fast path's lexer (see prescan.h and docs/gate.md, "The fast path"):
// follows Python's lexical grammar closely enough to find every name CPython
// will see, with the bracket context and the scope of its logical line, and
// gives up on whatever it is not sure to read as CPython does. Internal to
// sandbox/prescan*.cc.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace dolsot::sandbox::prescan {

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

// Hard keywords but the three constants: a bracket after one of them opens a
// display, not a trailer (`True[0]` is a subscript, however odd).
bool IsKeyword(std::string_view name);

// Compound statements: their header needs a `:` outside brackets.
bool IsCompoundKeyword(std::string_view word);

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

}  // namespace dolsot::sandbox::prescan
