// CpythonStatementStarts, and the AST gate checked against CPython's parser:
// known tree-sitter/CPython differentials are refused with and without the
// oracle, and a fixed-seed fuzz of mutated cells finds no cell whose
// statements the two read differently that the gate's tree checks allow.
#include "embedded/cpython_statements.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "sandbox/check_cell.h"
#include "sandbox/policy.h"

namespace dolsot {
namespace {

sandbox::StatementOracle CpythonOracle() {
  return [](std::string_view code) -> StatusOr<std::vector<sandbox::StatementStart>> {
    StatusOr<std::vector<CpythonStatementStart>> starts = CpythonStatementStarts(code);
    if (!starts.ok()) return starts.status();
    std::vector<sandbox::StatementStart> out;
    for (const CpythonStatementStart& start : *starts) out.push_back({start.line, start.column});
    return out;
  };
}

bool HasRule(const std::vector<sandbox::Finding>& findings, std::string_view rule) {
  for (const sandbox::Finding& finding : findings) {
    if (finding.rule_id() == rule) return true;
  }
  return false;
}

TEST(CpythonStatementStarts, ListsNestedStatementsElifAndDefinitionsAtTheirKeyword) {
  auto starts = CpythonStatementStarts(
      "if a:\n  pass\nelif b:\n  x = 1; y = 2\n@d\ndef f():\n  return 1\n"
      "try:\n  pass\nexcept E:\n  z = 3\nmatch q:\n  case 1:\n    w = 4\n");
  ASSERT_TRUE(starts.ok()) << starts.status().ToString();
  std::vector<std::pair<uint32_t, uint32_t>> got;
  for (const auto& start : *starts) got.emplace_back(start.line, start.column);
  std::vector<std::pair<uint32_t, uint32_t>> want = {
      {1, 0}, {2, 2}, {3, 0}, {4, 2}, {4, 9}, {6, 0}, {7, 2},
      {8, 0}, {9, 2}, {11, 2}, {12, 0}, {14, 4}};
  EXPECT_EQ(got, want);
}

TEST(CpythonStatementStarts, ASyntaxErrorIsInvalidArgumentWithCpythonsMessage) {
  auto starts = CpythonStatementStarts("x = = 1\n");
  ASSERT_FALSE(starts.ok());
  EXPECT_EQ(starts.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(starts.status().message().find("SyntaxError"), std::string::npos);
}

// tree-sitter-python reads each of these as other statements than CPython
// (found by the red team and by the fuzz below); CPython runs the store into
// `math` that tree-sitter does not see.
const char* const kDifferentials[] = {
    "import math\na, b\n[math.pi] = [1]\n",
    "import math\nmatch[x]:\n    case(1): math.pi = 1\n",
    "import math\nmatch(x)[x]:\n    case(1): math.pi = 1\n",
    "import math\ndef f():\n    a, b\n    [math.pi] = [1]\n",
};

TEST(GateAgainstCpython, KnownDifferentialsAreRefusedWithAndWithoutTheOracle) {
  sandbox::Policy plain = sandbox::DefaultPolicy();
  sandbox::Policy with_oracle = plain;
  with_oracle.statement_oracle = CpythonOracle();
  for (const char* code : kDifferentials) {
    ASSERT_TRUE(CpythonStatementStarts(code).ok()) << "valid Python: " << code;
    EXPECT_TRUE(HasRule(sandbox::CheckCell(code, plain), "syntax-error")) << code;
    EXPECT_TRUE(HasRule(sandbox::CheckCellFullPath(code, plain), "syntax-error")) << code;
    EXPECT_TRUE(HasRule(sandbox::CheckCellFullPath(code, with_oracle), "syntax-error")) << code;
  }
}

TEST(GateAgainstCpython, OrdinaryCellsAgreeAndStayAllowed) {
  sandbox::Policy policy = sandbox::DefaultPolicy();
  policy.statement_oracle = CpythonOracle();
  const char* const cells[] = {
      "x = 1; y = 2\nif x:\n    pass\nelif y:\n    z = [1,\n 2]\nelse:\n    z = 3\n",
      "@functools.lru_cache\ndef f(a,\n      b):\n    return a + \\\n        b\n",
      "match cmd:\n    case [a, *rest]:\n        print(a)\n    case _:\n        pass\n",
      "s = '''a\nb'''\nt = ('x'\n     'y')\nclass A:\n    '''doc'''\n    v: int = 1\n",
      "try:\n    pass\nexcept ValueError:\n    pass\nfinally:\n    q = 1\n",
  };
  for (const char* code : cells) {
    EXPECT_TRUE(sandbox::CheckCellFullPath(code, policy).empty())
        << code << sandbox::FormatFindings(sandbox::CheckCellFullPath(code, policy));
  }
  // CPython refuses it, tree-sitter does not: rejected as a syntax error.
  EXPECT_TRUE(HasRule(sandbox::CheckCellFullPath("def f():\n    pass\n  x = 1\n", policy),
                      "syntax-error"));
}

// Mutations of cells around the known differentials (tuples, brackets at a
// line start, match/case soft keywords, annotations, continuations). Every
// cell CPython parses and the gate's tree checks allow (no oracle) must have
// the statements CPython has. Fixed seeds; a few seconds.
TEST(GateAgainstCpython, FuzzedCellsTheTreeChecksAllowReadAsCpythonReadsThem) {
  const std::vector<std::string> seeds = {
      "a, b\n[m.pi] = [1]\n",
      "match x:\n    case 1:\n        m.pi = 1\n    case (a):\n        m.e = 2\n",
      "match(x):\n    case(1): m.pi = 1\n",
      "class C:\n    match x:\n        case str(): m.pi = 1\n",
      "for i in y:\n    match i:\n        case {'a': b}: m.tau = 1\n",
      "def f():\n    x: int = 1\n    return x\n",
      "y = (1,\n     2)\nz = y \\\n  + 1\n",
  };
  const std::vector<std::string> fragments = {
      "match", "case", "x", "(x)", "[x]", "*x", "x,", ":", " ", "\n", "\n    ",
      "\n        ", "m.pi = 1", "pass", "_", "1", "-", "{", "}", "(", ")", "[", "]",
      ",", "=", "if", "else", "lambda", "type", "a, b", "\n[", "def", "->", "@",
      "|", "as", ".", "'s'", "not", "in", "\\\n", "case(", "match(", "y: int", ";",
      "\n(", "\n-", "\n*", "\n{", "\n'a'", "await", "print",
  };
  sandbox::Policy policy = sandbox::DefaultPolicy();
  std::size_t parsed = 0, compared = 0;
  for (unsigned seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    for (int n = 0; n < 20000; ++n) {
      std::string cell = seeds[rng() % seeds.size()];
      for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) {
        std::size_t at = rng() % (cell.size() + 1);
        std::size_t cut = std::min(cell.size() - at, static_cast<std::size_t>(rng() % 5));
        cell.replace(at, cut, fragments[rng() % fragments.size()]);
      }
      auto cpython = CpythonStatementStarts(cell);
      if (!cpython.ok()) continue;
      ++parsed;
      if (!sandbox::CheckCellFullPath(cell, policy).empty()) continue;
      ++compared;
      sandbox::Policy with_oracle = policy;
      with_oracle.statement_oracle = CpythonOracle();
      ASSERT_TRUE(sandbox::CheckCellFullPath(cell, with_oracle).empty())
          << "tree-sitter and CPython read this cell differently, and the tree checks "
             "allowed it:\n" << cell;
    }
  }
  EXPECT_GT(parsed, 1000u);
  EXPECT_GT(compared, 500u);
}

}  // namespace
}  // namespace dolsot
