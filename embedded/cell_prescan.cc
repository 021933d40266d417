// The cell proofs' quick looks (see cell_prescan.h).
#include "embedded/cell_prescan.h"

#include <cstddef>

#include "core/python_chars.h"

namespace dolsot {

// Where the name starting at `i` ends.
static std::size_t NameEnd(std::string_view code, std::size_t i) {
  while (i < code.size() && IsNameByte(code[i])) ++i;
  return i;
}

// Where the number starting at `i` ends (1.5, 1e-3, 0x1F: no attribute).
static std::size_t NumberEnd(std::string_view code, std::size_t i) {
  while (i < code.size() && (IsNameByte(code[i]) || code[i] == '.')) ++i;
  return i;
}

// Words that make a cell not read-only wherever they stand (a statement, a
// lambda, an import): a word in a string or a comment only costs the fast
// path.
static bool RefusedWord(std::string_view word) {
  static constexpr std::string_view kWords[] = {
      "import", "def",    "class",  "lambda", "del",   "global", "nonlocal", "while",
      "with",   "try",    "except", "finally", "yield", "await",  "async",    "return",
      "raise",  "assert", "break",  "continue", "from"};
  for (std::string_view refused : kWords) {
    if (word == refused) return true;
  }
  return false;
}

// Methods a binding cell (and a proven function's body) may call on any
// value: on the builtin values a proof lets it reach they change only that
// value (the in-place methods of list, dict and set) or nothing, and run no
// code of the session's. Left out: format and format_map (attribute reads
// through a format string), encode and decode (a codec lookup may import).
const char* const kBindingMethodNames[] = {
    // list, dict and set, in place
    "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "add", "discard",
    "update", "setdefault", "popitem", "intersection_update", "difference_update",
    "symmetric_difference_update",
    // containers, reading
    "copy", "count", "index", "get", "keys", "values", "items", "fromkeys", "union",
    "intersection", "difference", "symmetric_difference", "issubset", "issuperset",
    "isdisjoint",
    // str and bytes
    "join", "split", "rsplit", "splitlines", "strip", "lstrip", "rstrip", "upper", "lower",
    "title", "capitalize", "casefold", "swapcase", "replace", "startswith", "endswith", "find",
    "rfind", "rindex", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower",
    "isnumeric", "isdecimal", "isidentifier", "isprintable", "istitle", "isascii", "zfill",
    "center", "ljust", "rjust", "partition", "rpartition", "expandtabs", "removeprefix",
    "removesuffix", "translate", "maketrans", "hex",
    // numbers, slices
    "bit_length", "bit_count", "is_integer", "as_integer_ratio", "conjugate", "indices"};

bool IsBindingMethod(std::string_view word) {
  for (std::string_view method : kBindingMethodNames) {
    if (word == method) return true;
  }
  return false;
}

// Words that keep a cell off the binding proof where they stand in the
// cell's own code (not in the body of a def it makes): statements and
// expressions that import, bind names the proof cannot follow, run or
// leave code, or make classes.
static bool RefusedBindingWord(std::string_view word) {
  static constexpr std::string_view kWords[] = {
      "import", "class", "del", "global", "nonlocal", "with", "try", "except",
      "finally", "yield", "await", "async", "return", "raise", "from"};
  for (std::string_view refused : kWords) {
    if (word == refused) return true;
  }
  return false;
}

// The binding proof's quick look, as MayBeReadOnly's: a word of the above,
// an attribute but a method of BindingMethods, a decorator or `:=` in the code the
// cell runs turn it away. The body of a def (the indented lines after a
// `def` at the start of a line, outside brackets) is skipped: defining a
// function runs none of it; the parse decides what a call may.
bool MayBind(std::string_view code) {
  int depth = 0;           // brackets open (strings not told apart)
  bool line_start = true;  // nothing but blanks on this line yet
  bool in_def = false;     // in the lines of a def's body
  std::size_t indent = 0;
  for (std::size_t i = 0; i < code.size();) {
    const char c = code[i];
    if (c == '\n') {
      line_start = true;
      indent = 0;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\\') {
      if (line_start) ++indent;
      ++i;
      continue;
    }
    if (c == '#') {
      while (i < code.size() && code[i] != '\n') ++i;
      continue;
    }
    if (line_start && depth == 0) {
      if (indent == 0) {
        in_def = code.substr(i, 4) == "def " || code.substr(i, 4) == "def\t";
      } else if (in_def) {  // a line of the def's body: skipped whole
        while (i < code.size() && code[i] != '\n') ++i;
        continue;
      }
    }
    line_start = false;
    if (IsNameStartByte(c)) {
      const std::size_t end = NameEnd(code, i);
      if (RefusedBindingWord(code.substr(i, end - i))) return false;
      i = end;
      continue;
    }
    if (IsAsciiDigit(c)) {
      i = NumberEnd(code, i);
      continue;
    }
    switch (c) {
      case '.':
        if (i + 1 < code.size() && IsNameStartByte(code[i + 1])) {  // an attribute
          const std::size_t end = NameEnd(code, i + 1);
          if (!IsBindingMethod(code.substr(i + 1, end - i - 1))) return false;
          i = end;
          continue;
        }
        break;
      case '@':
        return false;  // a decorator (or a matrix product: the general path)
      case '(': case '[': case '{':
        ++depth;
        break;
      case ')': case ']': case '}':
        if (depth > 0) --depth;
        break;
      case ':':
        if (i + 1 < code.size() && code[i + 1] == '=') return false;  // :=
        break;
      default:
        break;
    }
    ++i;
  }
  return true;
}

// A linear scan that turns away, in about a microsecond, most cells that
// are not read-only (an assignment, an attribute, a statement, a block),
// before Python's parser (30-150 us) is asked: a cell that could change
// state pays only this. It never says no to a cell the full check would
// pass, except where its crude view of strings sees code in one (a false
// "no" only costs the fast path); what it lets through, the full check
// decides.
bool MayBeReadOnly(std::string_view code) {
  int depth = 0;            // brackets open (strings not told apart)
  bool line_start = true;   // nothing but blanks on this line yet
  for (std::size_t i = 0; i < code.size();) {
    const char c = code[i];
    if (c == '\n') {
      line_start = true;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\\') {
      ++i;
      continue;
    }
    if (c == '#') {
      while (i < code.size() && code[i] != '\n') ++i;
      continue;
    }
    const bool at_line_start = line_start && depth == 0;
    line_start = false;
    if (IsNameStartByte(c)) {
      const std::size_t end = NameEnd(code, i);
      std::string_view word = code.substr(i, end - i);
      if (RefusedWord(word)) return false;
      if (depth == 0 && word == "for") return false;  // a loop (a comprehension has brackets)
      if (at_line_start && (word == "if" || word == "elif" || word == "else")) return false;
      i = end;
      continue;
    }
    if (IsAsciiDigit(c)) {
      i = NumberEnd(code, i);
      continue;
    }
    switch (c) {
      case '.':
        if (i + 1 < code.size() && IsNameStartByte(code[i + 1])) return false;  // an attribute
        break;
      case '(': case '[': case '{':
        ++depth;
        break;
      case ')': case ']': case '}':
        if (depth > 0) --depth;
        break;
      case ':':
        if (depth == 0) return false;  // a block, an annotation
        if (i + 1 < code.size() && code[i + 1] == '=') return false;  // :=
        break;
      case '=': {
        const bool comparison = (i + 1 < code.size() && code[i + 1] == '=') ||
                                (i > 0 && (code[i - 1] == '=' || code[i - 1] == '!' ||
                                           code[i - 1] == '<' || code[i - 1] == '>'));
        if (comparison) {
          i += (i + 1 < code.size() && code[i + 1] == '=') ? 2 : 1;
          continue;
        }
        if (depth == 0) return false;  // an assignment, += and the like
        break;  // a keyword argument
      }
      default:
        break;
    }
    ++i;
  }
  return true;
}

std::span<const char* const> BindingMethods() { return kBindingMethodNames; }

}  // namespace dolsot
