// CpythonOracleProcess: CPython's statement starts from a `python -I -S`
// child, the AST gate refusing tree-sitter/CPython differentials with it (as
// the CLI's gate does), and every way the child can fail: missing, not
// Python, hung, killed between and during questions; none leaves a process.
#include "sandbox/cpython_oracle_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/check_cell.h"
#include "sandbox/policy.h"

namespace dolsot::sandbox {
namespace {

using namespace std::chrono_literals;

const char* const kPython = DOLSOT_TEST_PYTHON;

bool Exists(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno != ESRCH); }

bool HasRule(const std::vector<Finding>& findings, std::string_view rule) {
  for (const Finding& finding : findings) {
    if (finding.rule_id() == rule) return true;
  }
  return false;
}

std::vector<std::pair<uint32_t, uint32_t>> Pairs(const std::vector<StatementStart>& starts) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const StatementStart& start : starts) out.emplace_back(start.line, start.column);
  return out;
}

TEST(CpythonOracleProcess, ListsNestedStatementsAsTheEmbeddedOracleDoes) {
  CpythonOracleProcess oracle(kPython);
  auto starts = oracle.StatementStarts(
      "if a:\n  pass\nelif b:\n  x = 1; y = 2\n@d\ndef f():\n  return 1\n"
      "try:\n  pass\nexcept E:\n  z = 3\nmatch q:\n  case 1:\n    w = 4\n");
  ASSERT_TRUE(starts.ok()) << starts.status().ToString();
  std::vector<std::pair<uint32_t, uint32_t>> want = {
      {1, 0}, {2, 2}, {3, 0}, {4, 2}, {4, 9}, {6, 0}, {7, 2},
      {8, 0}, {9, 2}, {11, 2}, {12, 0}, {14, 4}};
  EXPECT_EQ(Pairs(*starts), want);
  // Columns are UTF-8 bytes, as CPython's col_offset.
  auto unicode = oracle.StatementStarts("é = 1; b = 2\n");
  ASSERT_TRUE(unicode.ok());
  EXPECT_EQ(Pairs(*unicode), (std::vector<std::pair<uint32_t, uint32_t>>{{1, 0}, {1, 8}}));
}

TEST(CpythonOracleProcess, OneChildAnswersManyQuestions) {
  CpythonOracleProcess oracle(kPython);
  ASSERT_TRUE(oracle.StatementStarts("x = 1\n").ok());
  const int pid = oracle.pid();
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 20; ++i) {
    auto starts = oracle.StatementStarts("x = " + std::to_string(i) + "\ny = x\n");
    ASSERT_TRUE(starts.ok());
    EXPECT_EQ(starts->size(), 2u);
  }
  EXPECT_EQ(oracle.pid(), pid);
}

TEST(CpythonOracleProcess, WhatCpythonCannotParseIsInvalidArgumentWithItsMessage) {
  CpythonOracleProcess oracle(kPython);
  auto bad = oracle.StatementStarts("x = = 1\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("SyntaxError"), std::string::npos);
  // NUL bytes and nesting beyond CPython's parser are CPython's refusals too.
  auto nul = oracle.StatementStarts(std::string("x = 1\0\n", 7));
  ASSERT_FALSE(nul.ok());
  EXPECT_EQ(nul.status().code(), ErrorCode::kInvalidArgument);
  auto deep = oracle.StatementStarts("x = " + std::string(5000, '(') + std::string(5000, ')') + "\n");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().code(), ErrorCode::kInvalidArgument);
  // The child survives its refusals.
  EXPECT_TRUE(oracle.StatementStarts("y = 2\n").ok());
}

TEST(CpythonOracleProcess, ALargeCellIsAnswered) {
  CpythonOracleProcess oracle(kPython);
  std::string code;
  for (int i = 0; i < 100000; ++i) code += "v" + std::to_string(i) + " = " + std::to_string(i) + "\n";
  auto starts = oracle.StatementStarts(code);
  ASSERT_TRUE(starts.ok()) << starts.status().ToString();
  ASSERT_EQ(starts->size(), 100000u);
  EXPECT_EQ(Pairs(*starts).back(), (std::pair<uint32_t, uint32_t>{100000, 0}));
}

TEST(CpythonOracleProcess, AMissingInterpreterIsUnavailable) {
  CpythonOracleProcess oracle("/nonexistent/python3");
  auto starts = oracle.StatementStarts("x = 1\n");
  ASSERT_FALSE(starts.ok());
  EXPECT_EQ(starts.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(starts.status().message().find("/nonexistent/python3"), std::string::npos);
  EXPECT_EQ(oracle.pid(), -1);
}

TEST(CpythonOracleProcess, AnExecutableThatIsNotPythonIsUnavailable) {
  // /bin/true exits at once: no "R".
  CpythonOracleProcess exits("/bin/true");
  auto starts = exits.StatementStarts("x = 1\n");
  ASSERT_FALSE(starts.ok());
  EXPECT_EQ(starts.status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(exits.pid(), -1);
  // One that never answers: the deadline ends the wait, the child is killed.
  char dir[] = "/tmp/dolsot-oracle-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string silent = std::string(dir) + "/silent";
  {
    std::ofstream script(silent);
    script << "#!/bin/sh\nexec sleep 1000\n";
  }
  ASSERT_EQ(::chmod(silent.c_str(), 0700), 0);
  CpythonOracleProcess hangs(silent, 300ms);
  ASSERT_TRUE(hangs.Start().ok());
  const int pid = hangs.pid();
  starts = hangs.StatementStarts("x = 1\n");
  ASSERT_FALSE(starts.ok());
  EXPECT_EQ(starts.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(starts.status().message().find("in time"), std::string::npos);
  EXPECT_EQ(hangs.pid(), -1);
  EXPECT_FALSE(Exists(pid));
  ::unlink(silent.c_str());
  ::rmdir(dir);
}

TEST(CpythonOracleProcess, AChildKilledBetweenQuestionsRefusesTheCellThenIsReplaced) {
  CpythonOracleProcess oracle(kPython);
  ASSERT_TRUE(oracle.StatementStarts("x = 1\n").ok());
  const int first = oracle.pid();
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  // The question it could not answer: refused, never let through unchecked.
  auto lost = oracle.StatementStarts("y = 2\n");
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(lost.status().message().find("cannot be checked"), std::string::npos);
  EXPECT_FALSE(Exists(first));  // reaped, not a zombie
  auto next = oracle.StatementStarts("y = 2\n");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_NE(oracle.pid(), first);
}

TEST(CpythonOracleProcess, AChildStoppedMidQuestionHitsTheDeadlineAndIsKilled) {
  CpythonOracleProcess oracle(kPython, 500ms);
  ASSERT_TRUE(oracle.StatementStarts("x = 1\n").ok());
  const int pid = oracle.pid();
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  auto stuck = oracle.StatementStarts("y = 2\n");
  ASSERT_FALSE(stuck.ok());
  EXPECT_EQ(stuck.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(Exists(pid));
  EXPECT_TRUE(oracle.StatementStarts("y = 2\n").ok());
}

TEST(CpythonOracleProcess, TheDestructorKillsAndReapsTheChild) {
  int pid = -1;
  {
    CpythonOracleProcess oracle(kPython);
    ASSERT_TRUE(oracle.StatementStarts("x = 1\n").ok());
    pid = oracle.pid();
    ASSERT_TRUE(Exists(pid));
  }
  EXPECT_FALSE(Exists(pid));
}

TEST(CpythonOracleProcess, QuestionsFromManyThreadsAreAnsweredOneAtATime) {
  CpythonOracleProcess oracle(kPython);
  std::vector<std::thread> threads;
  std::vector<int> right(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        std::string code;
        for (int line = 0; line <= t; ++line) code += "a = 1\n";
        auto starts = oracle.StatementStarts(code);
        if (starts.ok() && starts->size() == static_cast<std::size_t>(t + 1)) ++right[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(right[t], 10) << t;
}

// The gate with this oracle, as the CLI builds it: the known differentials
// are refused, ordinary cells pass, and a missing interpreter leaves the
// tree's own checks.
const char* const kDifferentials[] = {
    "import math\na, b\n[math.pi] = [1]\n",
    "import math\nmatch[x]:\n    case(1): math.pi = 1\n",
    "import math\ndef f():\n    a, b\n    [math.pi] = [1]\n",
};

TEST(GateWithProcessOracle, RefusesDifferentialsAndAllowsOrdinaryCells) {
  Policy policy = DefaultPolicy();
  policy.statement_oracle = MakeCpythonProcessOracle(kPython);
  ASSERT_TRUE(policy.statement_oracle);
  for (const char* code : kDifferentials) {
    EXPECT_TRUE(HasRule(CheckCellFullPath(code, policy), "syntax-error")) << code;
  }
  const char* const cells[] = {
      "x = 1; y = 2\nif x:\n    pass\nelif y:\n    z = [1,\n 2]\nelse:\n    z = 3\n",
      "match cmd:\n    case [a, *rest]:\n        print(a)\n    case _:\n        pass\n",
      "try:\n    pass\nexcept ValueError:\n    pass\nfinally:\n    q = 1\n",
  };
  for (const char* code : cells) {
    EXPECT_TRUE(CheckCellFullPath(code, policy).empty())
        << code << FormatFindings(CheckCellFullPath(code, policy));
  }
  // CPython refuses it, tree-sitter reads it: a syntax error with CPython's words.
  auto findings = CheckCellFullPath("def f():\n    pass\n  x = 1\n", policy);
  ASSERT_TRUE(HasRule(findings, "syntax-error"));
  EXPECT_NE(FormatFindings(findings).find("CPython cannot parse the cell"), std::string::npos);
}

TEST(GateWithProcessOracle, NoInterpreterLeavesTheTreesOwnChecks) {
  EXPECT_FALSE(MakeCpythonProcessOracle(""));
  Policy policy = DefaultPolicy();
  policy.statement_oracle = MakeCpythonProcessOracle("/nonexistent/python3");
  EXPECT_TRUE(CheckCellFullPath("x = 1\n", policy).empty());
  EXPECT_TRUE(HasRule(CheckCellFullPath("import os\n", policy), "import-denied"));
}

}  // namespace
}  // namespace dolsot::sandbox
