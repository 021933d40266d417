// ScanPlainExpressions (embedded/plain_expressions.h): the cells it reads
// off the bytes, the ones it leaves to the parsed proof, and, against
// CPython's own parser over thousands of generated cells, that every cell it
// accepts and Python parses is expressions only, of the nodes the parsed
// proof accepts, with the same names, all read.
#include "embedded/plain_expressions.h"

#include <gtest/gtest.h>
#include <pybind11/embed.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace py = pybind11;

namespace dolsot {
namespace {

std::vector<std::string> Scan(const std::string& code, bool* accepted) {
  std::vector<std::string_view> views;
  *accepted = ScanPlainExpressions(code, &views);
  return {views.begin(), views.end()};
}

TEST(PlainExpressionsTest, ExpressionsOfNamesNumbersAndOperatorsAreReadWithTheirNames) {
  struct Case {
    const char* code;
    std::vector<std::string> names;
  };
  for (const Case& c : std::vector<Case>{
           {"1+1", {}},
           {"", {}},
           {"# only a comment", {}},
           {"n * 2", {"n"}},
           {"len(items), max(t)", {"len", "items", "max", "t"}},
           {"x[1:2, ::3] if_ * 0x1F + 0o7 - 0b1 + 1_000.5e-3j", {"x", "if_"}},
           {"not a and b or c in d is not None", {"a", "b", "c", "d"}},
           {"{1: 2, **d}; [*s]\n(a // b) ** c << 2 >> 1 & 3 | 4 ^ ~5 % 6", {"d", "s", "a", "b", "c"}},
           {"a <= b >= c == d != e < f > g", {"a", "b", "c", "d", "e", "f", "g"}},
           {"n  # n = 2 is in a comment\nm", {"n", "m"}},
           {"match(x)", {"match", "x"}},
           {"(1 +\n 2); -n,", {"n"}},
       }) {
    bool accepted = false;
    std::vector<std::string> names = Scan(c.code, &accepted);
    EXPECT_TRUE(accepted) << c.code;
    EXPECT_EQ(names, c.names) << c.code;
  }
}

TEST(PlainExpressionsTest, AnythingThatCouldBindCallCodeOrHideTokensIsRefused) {
  for (const char* code : {
           "x = 1", "x += 1", "x -= 1", "x *= 2", "x /= 2", "x //= 2", "x **= 2", "x %= 2",
           "x <<= 1", "x >>= 1", "x &= 1", "x |= 1", "x ^= 1", "(y := 1)", "x[a:=1]", "x: int",
           "x[0]: int", "f(a=1)", "x.y", "x . y", "1 .real", "1.real", "1..real", "1.", ".5",
           "1if x else y", "1else", "0x1for x", "0b12", "0o8", "1e", "1e+", "...", "x @ y",
           "'s'", "\"s\"", "f'{x}'", "b''", "x \\\n+ 1", "[x for x in y]", "lambda: 1",
           "del x", "import os", "await x", "yield x", "x if y else z", "pass", "global x",
           "x -> y", "x <> y", "!x", "x ! y", "\xc3\xa9", "x\xc3\xa9", "x $ y", "x ? y", "`x`",
           "x # comment\ry = 1", "x # comment\x0by = 1", "(1", "1)", "match x:\n case 1: 2",
           "async", "1 +", "n and", "not", "1 + # c\n2", "1 -;2"}) {
    bool accepted = true;
    Scan(code, &accepted);
    EXPECT_FALSE(accepted) << code;
  }
}

// Whether Python parses `code`, and then whether every node is one the
// parsed proof accepts, with no statement but expressions and every name
// read; `names` gets them.
constexpr char kCheckSource[] = R"PY(
import ast
import warnings
ALLOWED = (ast.Module, ast.Expr, ast.Constant, ast.Name, ast.Load, ast.BinOp, ast.UnaryOp,
           ast.BoolOp, ast.Compare, ast.Call, ast.keyword, ast.Tuple, ast.List, ast.Set,
           ast.Dict, ast.Subscript, ast.Slice, ast.Starred, ast.operator, ast.unaryop,
           ast.boolop, ast.cmpop)
def check(code):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            tree = compile(code, '<scan>', 'exec', ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    names = []
    for node in ast.walk(tree):
        if not isinstance(node, ALLOWED):
            return ('node', type(node).__name__)
        if isinstance(node, (ast.Name, ast.Subscript, ast.Starred, ast.Tuple, ast.List)) and \
                not isinstance(node.ctx, ast.Load):
            return ('store', type(node).__name__)
        if isinstance(node, ast.Name):
            names.append(node.id)
        if isinstance(node, ast.keyword) and node.arg is not None:
            return ('keyword', node.arg)
    return ('ok', sorted(set(names)))
)PY";

TEST(PlainExpressionsTest, EveryAcceptedCellThatPythonParsesIsExpressionsOfReadNamesOnly) {
  py::gil_scoped_acquire gil;
  py::dict scope;
  py::exec(kCheckSource, scope);
  py::object check = scope["check"];
  // Tokens the scan accepts, and near misses, glued with and without blanks.
  const std::vector<std::string> pieces = {
      "x", "y", "n", "len", "print", "match", "case", "type", "_", "1", "0", "2.5", "1e3",
      "3j", "0x1f", "0o7", "0b1", "1_0", "+", "-", "*", "/", "//", "%", "**", "<<", ">>",
      "&", "|", "^", "~", "<", ">", "<=", ">=", "==", "!=", "(", ")", "[", "]", "{", "}",
      ",", ";", ":", "\n", " ", "\t", "and", "or", "not", "in", "is", "None", "True",
      "False", "# c", "=", ".", "if", "else", "for", "lambda", "'", "@", "\r", "\\\n",
      ":=", "->", "...", "f", "e", "j", "async", "del", "r"};
  std::mt19937 random(20261205);
  int accepted_parsed = 0;
  for (int round = 0; round < 40000; ++round) {
    std::string code;
    const int length = 1 + static_cast<int>(random() % 9);
    for (int k = 0; k < length; ++k) {
      code += pieces[random() % pieces.size()];
      if (random() % 3 == 0) code += ' ';
    }
    bool accepted = false;
    std::vector<std::string> names = Scan(code, &accepted);
    if (!accepted) continue;
    py::object verdict = check(py::bytes(code).attr("decode")("utf-8"));
    if (verdict.is_none()) continue;  // a SyntaxError: the cell fails, nothing runs
    ++accepted_parsed;
    auto outcome = verdict.cast<py::tuple>();
    ASSERT_EQ(outcome[0].cast<std::string>(), "ok")
        << "accepted: [" << code << "] " << py::str(verdict).cast<std::string>();
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    EXPECT_EQ(outcome[1].cast<std::vector<std::string>>(), names) << "[" << code << "]";
  }
  // The generator must reach accepted, parsed cells, or this proves nothing.
  EXPECT_GT(accepted_parsed, 1000);
}

}  // namespace
}  // namespace dolsot
