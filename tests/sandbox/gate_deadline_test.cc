// What an in-process run() cannot stop or will run later (#38, "The deadline"
// and "Deferred code"): slow-pattern, huge-constant and deferred-code, each
// with its benign neighbours, on both paths; and the two analyses under them
// (regex_risk.h, constant_size.h) on their own.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sandbox/check_cell.h"
#include "sandbox/prescan.h"
#include "sandbox/regex_risk.h"

namespace dolsot::sandbox {
namespace {

struct Case {
  const char* name;
  const char* code;
  const char* rule;   // nullptr: allowed
  bool fast = false;  // allowed, and the fast path proves it
  int line = 0;       // the refused cell's finding is on this line (0: not checked)
};

std::ostream& operator<<(std::ostream& out, const Case& c) { return out << c.name; }

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      // slow-pattern: every spelling of the call, the pattern's spellings
      {"re_compile", "import re\nre.compile(r'(a+)+$')\n", "slow-pattern", false, 2},
      {"re_match", "import re\nre.match('(x*)*y', s)\n", "slow-pattern", false, 2},
      {"re_search", "import re\nre.search(r'(\\w+\\s?)*$', s)\n", "slow-pattern"},
      {"re_fullmatch", "import re\nre.fullmatch('(a|b+)+c', s)\n", "slow-pattern"},
      {"re_findall", "import re\nre.findall('(.*a){20}', s)\n", "slow-pattern"},
      {"re_finditer", "import re\nre.finditer('((a+)b)+', s)\n", "slow-pattern"},
      {"re_sub", "import re\nre.sub('(a+)+', '', s)\n", "slow-pattern"},
      {"re_subn", "import re\nre.subn('(a*)*', '', s)\n", "slow-pattern"},
      {"re_split", "import re\nre.split('(a{1,9})+$', s)\n", "slow-pattern"},
      {"re_alias", "import re as r\nr.match('(a+)+', s)\n", "slow-pattern"},
      {"from_import", "from re import match\nmatch('(a+)+', s)\n", "slow-pattern", false, 2},
      {"from_import_alias", "from re import search as find\nfind('(a+)+', s)\n", "slow-pattern"},
      {"from_import_after_use", "def f(s):\n    return m('(a+)+', s)\nfrom re import match as m\n", "slow-pattern"},
      {"keyword_pattern", "import re\nre.compile(pattern='(a+)+')\n", "slow-pattern"},
      {"parenthesised", "import re\nre.compile((('(a+)+')))\n", "slow-pattern"},
      {"concatenated", "import re\nre.compile('(a' '+)+')\n", "slow-pattern"},
      {"escaped_parentheses", "import re\nre.compile('\\x28a+\\x29+')\n", "slow-pattern"},
      {"bytes_pattern", "import re\nre.compile(rb'(a+)+')\n", "slow-pattern"},
      {"verbose_pattern", "import re\nre.compile('''(a +  # many\n)+''', re.X)\n", "slow-pattern"},
      {"named_group", "import re\nre.compile('(?P<w>a+)+')\n", "slow-pattern"},
      {"pattern_by_name", "import re\np = r'(a+)+$'\nre.fullmatch(p, s)\n", "slow-pattern", false, 2},
      {"pattern_in_comprehension", "import re\n[re.match('(a*)*b', x) for x in xs]\n", "slow-pattern"},
      {"pattern_in_lambda", "import re\nf = lambda s: re.search('(a+)+', s)\n", "slow-pattern"},
      {"simple_patterns",
       "import re\nre.compile(r'\\d+')\nre.match(r'(\\d{1,3}\\.){3}\\d{1,3}', s)\n"
       "re.findall(r'(ab)+', s)\nre.sub(r'\\s+', ' ', s)\nre.split(r'(a++)+', s)\n"
       "re.search(r'(?>a+)+', s)\nre.match(r'(a{2})*', s)\nre.match(r'(a|b)*c', s)\n", nullptr, true},
      {"nested_looking_text_elsewhere", "expr = '(1+2)*3'\nprint('(a+)+')\n", nullptr},
      {"string_split_with_such_a_separator", "parts = s.split('(a+)+')\n", "slow-pattern"},
      {"fstring_pattern_not_seen", "import re\nre.match(f'({x}+)+', s)\n", nullptr, true},
      // huge-constant
      {"power", "x = 7 ** 30000000\n", "huge-constant", false, 1},
      {"pow_builtin", "x = pow(7, 30000000)\n", "huge-constant"},
      {"negated_power", "x = -(10) ** 10**7\n", "huge-constant"},
      {"power_tower", "x = 2 ** 2 ** 2 ** 2 ** 2 ** 2\n", "huge-constant"},
      {"power_tower_small", "x = 2 ** 2 ** 2 ** 2 ** 2\n", nullptr},
      {"power_of_power", "x = (10 ** 1000) ** 1000\n", "huge-constant"},
      {"power_hex_exponent", "x = 3 ** 0x10000000\n", "huge-constant"},
      {"power_underscores", "x = 9 ** 1_000_000_0\n", "huge-constant"},
      {"power_of_a_value", "x = n ** 4000000\n", "huge-constant"},
      {"power_of_a_fraction", "import fractions\nx = fractions.Fraction(7) ** 30000000\n", "huge-constant"},
      {"power_augmented", "x = 7\nx **= 10 ** 7\n", "huge-constant", false, 2},
      {"power_in_a_function", "def f():\n    return 10 ** 10 ** 7\n", "huge-constant"},
      {"shift", "x = 1 << 10 ** 8\n", "huge-constant"},
      {"shift_augmented", "x <<= 4000000\n", "huge-constant"},
      {"product_of_big_powers", "x = 10 ** 999999 * 10 ** 999999\n", "huge-constant"},
      {"string_repeated", "s = 'a' * 10 ** 9\n", "huge-constant"},
      {"bytes_repeated", "s = 10 ** 9 * b'ab'\n", "huge-constant"},
      {"list_repeated", "s = [0] * 200_000_000\n", "huge-constant"},
      {"tuple_repeated", "s = (1, 2) * (10 ** 8)\n", "huge-constant"},
      {"repeated_twice", "s = ('ab' * 9000) * 9000\n", "huge-constant"},
      {"factorial", "import math\nmath.factorial(10 ** 7)\n", "huge-constant", false, 2},
      {"factorial_imported", "from math import factorial\nfactorial(300000)\n", "huge-constant"},
      {"comb", "import math\nmath.comb(10 ** 8, 5 * 10 ** 7)\n", "huge-constant"},
      {"small_constants",
       "a = 2 ** 64\nb = 1 << 64\nc = x ** 2 + y ** 0.5\nd = '-' * 80\ne = [0] * 10\n"
       "x **= 2\nf = 10 ** -3\ng = 2 ** 3000000\n", nullptr},
      {"small_constants_fast", "a = 2 ** 64\nb = 1 << 64\nc = x ** 2 + y ** 0.5\nd = '-' * 80\n", nullptr, true},
      {"million_list", "zeros = [0] * 10 ** 6\n", nullptr},
      {"float_power", "x = 10.0 ** 400000\ny = 7 ** 30000000.0\n", nullptr},
      {"small_factorial", "import math\nmath.factorial(20), math.comb(50, 3)\n", nullptr},
      {"modular_pow", "x = pow(7, 30000000, 13)\n", nullptr},
      // deferred-code
      {"yield_in_try_finally", "def g():\n    try:\n        yield 1\n    finally:\n        print('x')\n", "deferred-code", false, 3},
      {"yield_in_try_except", "def g():\n    try:\n        yield 1\n    except BaseException:\n        pass\n", "deferred-code"},
      {"yield_in_handler", "def g():\n    try:\n        pass\n    except Exception:\n        yield 1\n", "deferred-code"},
      {"yield_from_in_try", "def g():\n    try:\n        yield from h()\n    finally:\n        pass\n", "deferred-code"},
      {"yield_in_with", "def g():\n    with cm() as f:\n        yield f\n", "deferred-code"},
      {"yield_in_nested_block", "def g():\n    try:\n        for i in x:\n            if i:\n                yield i\n    finally:\n        pass\n", "deferred-code"},
      {"yield_expression_in_try", "def g():\n    try:\n        v = (yield)\n    finally:\n        pass\n", "deferred-code"},
      {"lambda_yield_in_try", "try:\n    pass\nfinally:\n    f = 1\ng = lambda: (yield)\n", nullptr},
      {"await_in_try", "async def c():\n    try:\n        await x\n    finally:\n        pass\n", "deferred-code"},
      {"await_in_with", "async def c():\n    with cm():\n        await x\n", "deferred-code"},
      {"async_with", "async def c():\n    async with x:\n        pass\n", "deferred-code", false, 2},
      {"async_for_in_try", "async def c():\n    try:\n        async for i in y:\n            pass\n    finally:\n        pass\n", "deferred-code"},
      {"async_comprehension_in_try", "async def c():\n    try:\n        return [i async for i in y]\n    finally:\n        pass\n", "deferred-code"},
      {"async_generator_in_try", "async def a():\n    try:\n        yield 1\n    finally:\n        await x\n", "deferred-code"},
      {"contextmanager_generator", "import contextlib\n@contextlib.contextmanager\ndef cm():\n    try:\n        yield\n    finally:\n        pass\n", "deferred-code"},
      {"generator_without_cleanup", "def g():\n    for i in range(3):\n        yield i\n    try:\n        pass\n    finally:\n        pass\n", nullptr},
      {"function_in_try", "try:\n    def g():\n        yield 1\nfinally:\n    pass\n", nullptr},
      {"try_in_function_in_generator", "def g():\n    def h():\n        try:\n            return 1\n        finally:\n            pass\n    yield h()\n", nullptr},
      {"coroutine_plain", "async def c():\n    await x\n    async for i in y:\n        print(i)\n", nullptr, true},
      {"generator_plain", "def g():\n    yield 1\n    yield from range(3)\n", nullptr, true},
      {"del_is_no_allowed_dunder", "class A:\n    def __del__(self):\n        pass\n", "dunder-name"},
      {"weakref_is_out", "import weakref\n", "import-denied"},
      {"atexit_is_out", "import atexit\n", "import-denied"},
      {"gc_is_out", "import gc\n", "import-denied"},
  };
  return cases;
}

bool Has(const std::vector<Finding>& findings, const char* rule, int line) {
  for (const Finding& finding : findings) {
    if (finding.rule_id() == rule && (line == 0 || finding.line == static_cast<std::uint32_t>(line))) {
      return true;
    }
  }
  return false;
}

class DeadlineTest : public ::testing::TestWithParam<Case> {};

TEST_P(DeadlineTest, BothPathsGiveTheExpectedVerdict) {
  const Case& c = GetParam();
  Policy policy = DefaultPolicy();
  std::vector<Finding> full = CheckCellFullPath(c.code, policy);
  std::vector<Finding> gate = CheckCell(c.code, policy);
  if (c.rule == nullptr) {
    EXPECT_TRUE(full.empty()) << FormatFindings(full);
    EXPECT_TRUE(gate.empty()) << FormatFindings(gate);
    EXPECT_EQ(PrescanProvesAllowed(c.code, policy), c.fast);
  } else {
    EXPECT_FALSE(PrescanProvesAllowed(c.code, policy));
    EXPECT_TRUE(Has(full, c.rule, c.line)) << "expected [" << c.rule << "] on line " << c.line
                                           << ":\n" << FormatFindings(full);
    EXPECT_TRUE(Has(gate, c.rule, c.line)) << FormatFindings(gate);
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, DeadlineTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(NestedQuantifier, FindsRepeatedGroupsHoldingRepeatedItems) {
  for (const char* pattern : {"(a+)+", "(a*)*", "(a+)*b", "x(a{1,5})+$", "((a+)b)+", "(a+){2}",
                              "(.*a){20}", "(?:a*)*", "(?P<x>\\w+\\s?)*", "([a-z]+\\.)+com"}) {
    EXPECT_TRUE(FindNestedQuantifier(pattern).has_value()) << pattern;
  }
  EXPECT_EQ(FindNestedQuantifier("xy(a+)+"), 2u);
}

TEST(NestedQuantifier, LeavesPatternsWithoutAmbiguousRepetition) {
  for (const char* pattern : {"a+b*", "(ab)+", "(a{2})*", "(a?)", "(a+)?", "(\\d{1,3}\\.){3}",
                              "(a++)+", "(?>a+)+", "(a+)++", "[(a+)+]", "\\(a+\\)+", "a{,3}",
                              "x{1", "(?#(a+)+)", "(a|b)*"}) {
    EXPECT_FALSE(FindNestedQuantifier(pattern).has_value()) << pattern;
  }
}

TEST(NestedQuantifier, ReadsVerbosePatternsBothWays) {
  EXPECT_TRUE(FindNestedQuantifier("(a + # one or more\n)+").has_value());
  EXPECT_TRUE(FindNestedQuantifier("(?x) ( a + ) +").has_value());
}

// Deep expressions fold without recursion and in linear time.
TEST(HugeConstant, DeepExpressionsFoldIteratively) {
  std::string chain = "x = 1";
  for (int i = 0; i < 1500; ++i) chain += " * 2";
  chain += "\n";
  EXPECT_TRUE(CheckCellFullPath(chain, DefaultPolicy()).empty());
  std::string tower = "x = (";
  for (int i = 0; i < 1000; ++i) tower += "(";
  tower += "7 ** 30000000";
  for (int i = 0; i < 1000; ++i) tower += ")";
  tower += ")\n";
  std::vector<Finding> findings = CheckCellFullPath(tower, DefaultPolicy());
  ASSERT_EQ(findings.size(), 1u) << FormatFindings(findings);
  EXPECT_EQ(findings[0].rule_id(), "huge-constant");
}

}  // namespace
}  // namespace dolsot::sandbox
