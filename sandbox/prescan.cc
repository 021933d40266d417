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
#include "sandbox/prescan_deadline.h"
#include "sandbox/prescan_lexer.h"
#include "sandbox/rules.h"

namespace dolsot::sandbox {
namespace {

using prescan::IsCompoundKeyword;
using prescan::IsKeyword;
using prescan::Lexer;
using prescan::Tok;
using prescan::Token;

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

// `io`, `StringIO`, `BytesIO`: allowed in some uses only (see CheckIoModuleUse).
bool IsIoName(std::string_view name) { return name == "io" || IsIoClassName(name); }

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
    if (IsPublicUnderscoreAttribute(name)) return true;  // namedtuple's `_replace`, ...
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
  if (Denied(first) || IsIoName(first)) return false;
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
    if (!AttributeOk(name) || IsIoName(name)) return false;
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
  if (!prescan::DeadlineRulesCannotFire(t_)) return false;
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
    if (IsIoName(name)) return false;  // io's names: the full path checks their uses
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
