// Specification of the shared cell-execution routine (embedded/cell_runner.h),
// run inside one embedded CPython.
#include "embedded/cell_runner.h"
#include "embedded/output_router.h"

#include <gtest/gtest.h>
#include <pybind11/embed.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace py = pybind11;

namespace dolsot {
namespace {

Result RunIn(py::dict& globals, std::string_view code, std::size_t max_output = kDefaultMaxOutput,
           OutputSink* sink = nullptr) {
  CellRequest request;
  request.code = code;
  request.filename = "<cell 1>";
  request.max_output = max_output;
  request.sink = sink;
  return RunCell(globals.ptr(), request);
}

bool EndsWith(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class RecordingSink : public OutputSink {
 public:
  void Write(std::string_view text) override { text_.append(text); }
  std::string text_;
};

TEST(RunCell, TrailingExpressionBecomesTheValue) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "x = 2\nx * 21");
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.exit_code, 0);
  ASSERT_TRUE(r.value.has_value());
  EXPECT_EQ(*r.value, "42");
  EXPECT_FALSE(r.error.has_value());
  EXPECT_EQ(r.held, std::vector<std::string>{"x"});
}

TEST(RunCell, NoneAndStatementsGiveNoValue) {
  py::gil_scoped_acquire gil;
  py::dict g;
  EXPECT_FALSE(RunIn(g, "None").value.has_value());
  EXPECT_FALSE(RunIn(g, "print('p')").value.has_value());
  Result r = RunIn(g, "y = 5");
  EXPECT_TRUE(r.ok);
  EXPECT_FALSE(r.value.has_value());
  EXPECT_EQ(r.stdout_text, "");
}

TEST(RunCell, StateCarriesBetweenCells) {
  py::gil_scoped_acquire gil;
  py::dict g;
  ASSERT_TRUE(RunIn(g, "def f(a):\n    return a + 1\n").ok);
  EXPECT_EQ(*RunIn(g, "f(41)").value, "42");
}

TEST(RunCell, PrintIsCaptured) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "print('hello')\nprint('a', 'b', sep='-')\n3");
  EXPECT_EQ(r.stdout_text, "hello\na-b\n");
  EXPECT_EQ(*r.value, "3");
}

TEST(RunCell, StderrJoinsStdout) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "import sys\nprint('out')\nsys.stderr.write('err\\n')\nprint('out2')");
  EXPECT_EQ(r.stdout_text, "out\nerr\nout2\n");
}

TEST(RunCell, SinkSeesEveryChunkBeforeTheCap) {
  py::gil_scoped_acquire gil;
  py::dict g;
  RecordingSink sink;
  Result r = RunIn(g, "for i in range(1000): print(i)", 100, &sink);
  std::string full;
  for (int i = 0; i < 1000; ++i) full += std::to_string(i) + "\n";
  EXPECT_EQ(sink.text_, full);
  EXPECT_NE(r.stdout_text, full);
}

TEST(RunCell, SyntaxErrorIsAFailedResultWithLineAndCaret) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "a = 1\nx = = 1\n");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_NE(r.error->find("<cell 1>"), std::string::npos) << *r.error;
  EXPECT_NE(r.error->find("line 2"), std::string::npos) << *r.error;
  EXPECT_NE(r.error->find("^"), std::string::npos) << *r.error;
  EXPECT_NE(r.error->find("SyntaxError"), std::string::npos) << *r.error;
  EXPECT_EQ(r.error->find("Traceback"), std::string::npos) << *r.error;
  EXPECT_FALSE(g.contains("a")) << "nothing runs when the cell does not parse";
}

TEST(RunCell, CompileTimeErrorsAreSyntaxErrorsToo) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "return 5");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error->find("SyntaxError"), std::string::npos) << *r.error;
}

TEST(RunCell, TracebackShowsOnlyTheUsersFramesAndLines) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "def f():\n    return 1 / 0\nf()");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_TRUE(r.error.has_value());
  const std::string& e = *r.error;
  EXPECT_EQ(e.rfind("Traceback (most recent call last):", 0), 0u) << e;
  EXPECT_NE(e.find("File \"<cell 1>\", line 3, in <module>"), std::string::npos) << e;
  EXPECT_NE(e.find("File \"<cell 1>\", line 2, in f"), std::string::npos) << e;
  EXPECT_NE(e.find("return 1 / 0"), std::string::npos) << e;  // linecache has the source
  EXPECT_TRUE(EndsWith(e, "ZeroDivisionError: division by zero")) << e;
  EXPECT_EQ(e.find("dolsot"), std::string::npos) << e;
  EXPECT_EQ(e.find(".py\""), std::string::npos) << "no engine frames: " << e;
}

TEST(RunCell, OutputBeforeAnErrorIsKept) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "print('before')\nraise ValueError('bad')");
  EXPECT_EQ(r.stdout_text, "before\n");
  EXPECT_TRUE(EndsWith(*r.error, "ValueError: bad"));
}

TEST(RunCell, ErrorInTrailingExpression) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "z = 1\nundefined_name");
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.value.has_value());
  EXPECT_NE(r.error->find("NameError"), std::string::npos);
  EXPECT_TRUE(g.contains("z"));
}

TEST(RunCell, ToolboxExceptionCarriesItsExitCode) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "class ToolError(Exception):\n    exit_code = 3\nraise ToolError('not found')");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_TRUE(EndsWith(*r.error, "ToolError: not found")) << *r.error;
  Result b = RunIn(g, "class BoolCode(Exception):\n    exit_code = True\nraise BoolCode()");
  EXPECT_EQ(b.exit_code, 1) << "a bool is not an exit code";
}

TEST(RunCell, SystemExitIsCaughtAndTheSessionKept) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "import sys\nkeep = 1\nsys.exit(4)");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.error->find("SystemExit"), std::string::npos);
  EXPECT_EQ(*RunIn(g, "keep + 1").value, "2");

  Result zero = RunIn(g, "sys.exit(0)");
  EXPECT_TRUE(zero.ok);
  EXPECT_EQ(zero.exit_code, 0);
  EXPECT_TRUE(RunIn(g, "sys.exit()").ok);
  Result text = RunIn(g, "sys.exit('bye')");
  EXPECT_FALSE(text.ok);
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.error->find("bye"), std::string::npos);
  EXPECT_EQ(RunIn(g, "sys.exit(1000)").exit_code, 1);
}

TEST(RunCell, KeyboardInterruptIsCaught) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "raise KeyboardInterrupt");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.error->find("KeyboardInterrupt"), std::string::npos);
}

TEST(RunCell, InputRaisesEOFErrorAtOnce) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "input('name? ')");
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(EndsWith(*r.error, "EOFError: EOF when reading a line")) << *r.error;
  EXPECT_EQ(r.stdout_text, "name? ");
  Result read = RunIn(g, "import sys\n(sys.stdin.read(), sys.stdin.readline(), sys.stdin.readlines())");
  EXPECT_EQ(*read.value, "('', '', [])");
}

TEST(RunCell, HugeOutputKeepsHeadAndTail) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "for i in range(200000): print(i)", 1000);
  const std::string& out = r.stdout_text;
  EXPECT_EQ(out.rfind("0\n1\n2\n", 0), 0u);
  EXPECT_TRUE(EndsWith(out, "199998\n199999\n"));
  EXPECT_NE(out.find("characters cut"), std::string::npos);
  EXPECT_NE(out.find("variable"), std::string::npos);
  EXPECT_LT(out.size(), 1400u);
}

TEST(RunCell, NoCapWhenMaxOutputIsZero) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "print('x' * 300000)", 0);
  EXPECT_EQ(r.stdout_text.size(), 300001u);
}

TEST(RunCell, HugeListReprIsBounded) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "big = [7] * 20_000_000\nbig", 200);
  ASSERT_TRUE(r.value.has_value());
  EXPECT_LE(r.value->size(), 200u);
  EXPECT_EQ(r.value->rfind("[7, 7, 7", 0), 0u) << *r.value;
  EXPECT_NE(r.value->find("list of 20000000 items"), std::string::npos) << *r.value;
}

TEST(RunCell, HugeStringAndBytesReprShowTheHead) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result s = RunIn(g, "'ab' * 50_000_000", 100);
  EXPECT_LE(s.value->size(), 100u);
  EXPECT_EQ(s.value->rfind("'abab", 0), 0u) << *s.value;
  EXPECT_NE(s.value->find("str of 100000000 characters"), std::string::npos) << *s.value;
  Result b = RunIn(g, "b'z' * 10_000_000", 100);
  EXPECT_EQ(b.value->rfind("b'zzz", 0), 0u) << *b.value;
  EXPECT_NE(b.value->find("bytes of 10000000 bytes"), std::string::npos) << *b.value;
}

TEST(RunCell, SmallContainersReprLikePython) {
  py::gil_scoped_acquire gil;
  py::dict g;
  const char* cases[] = {
      "[1, 'a', (2,), {3: [4]}, {5}, frozenset({6}), set(), frozenset(), (), [], {}]",
      "{'k': {'n': [1.5, None, True]}, (1, 2): b'x'}",
      "a = []\na.append(a)\na",
      "d = {}\nd['self'] = d\nd",
      "'quote\\'s' ",
  };
  for (std::string code : cases) {
    Result r = RunIn(g, code);
    std::string last_line = code.substr(code.rfind('\n') + 1);
    std::string expected = py::repr(py::eval(last_line, g));
    ASSERT_TRUE(r.value.has_value()) << code;
    EXPECT_EQ(*r.value, expected) << code;
  }
}

TEST(RunCell, NestedHugeContainerIsBounded) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "{'rows': ['x' * 10_000_000] * 5}", 300);
  EXPECT_LE(r.value->size(), 300u);
  EXPECT_EQ(r.value->rfind("{'rows': ['xxx", 0), 0u) << *r.value;
  EXPECT_NE(r.value->find("dict of 1 item, shortened"), std::string::npos) << *r.value;
}

TEST(RunCell, ReprThatRaisesGivesAPlaceholder) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "class Bad:\n    def __repr__(self):\n        raise ValueError('nope')\nBad()");
  EXPECT_TRUE(r.ok);
  EXPECT_NE(r.value->find("repr of Bad object failed: ValueError: nope"), std::string::npos)
      << *r.value;
}

TEST(RunCell, LongObjectReprIsCapped) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "class Long:\n    def __repr__(self):\n        return 'L' * 5000\nLong()", 100);
  EXPECT_LE(r.value->size(), 100u);
  EXPECT_NE(r.value->find("more characters ..."), std::string::npos) << *r.value;
}

TEST(RunCell, InvalidUtf8RunsNothing) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "x = 1\ny = '\xff'");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.error->find("not valid UTF-8"), std::string::npos) << *r.error;
  EXPECT_NE(r.error->find("offset 11"), std::string::npos) << *r.error;
  EXPECT_FALSE(g.contains("x"));
  Result overlong = RunIn(g, "'\xc0\xaf'");
  EXPECT_FALSE(overlong.ok);
  Result surrogate = RunIn(g, "'\xed\xa0\x80'");
  EXPECT_FALSE(surrogate.ok);
}

TEST(RunCell, NulByteRunsNothing) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, std::string_view("x = 1\0", 6));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error->find("NUL byte at offset 5"), std::string::npos) << *r.error;
  EXPECT_FALSE(g.contains("x"));
}

TEST(RunCell, SourceIsUtf8WhateverItsCodingCookieSays) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "# -*- coding: latin-1 -*-\n'h\xc3\xa9'");
  ASSERT_TRUE(r.ok) << r.error.value_or("");
  EXPECT_EQ(*r.value, "'h\xc3\xa9'");
}

TEST(RunCell, HeldListsNamesInOrderWithoutDundersOrHidden) {
  py::gil_scoped_acquire gil;
  py::dict g;
  g["mt"] = py::module_::import("math");
  CellRequest request;
  request.code = "import os\ndef f(): pass\nx = 1\n__secret__ = 2";
  request.filename = "<cell 1>";
  request.hidden_names = {"mt"};
  Result r = RunCell(g.ptr(), request);
  EXPECT_EQ(r.held, (std::vector<std::string>{"os", "f", "x"}));
  EXPECT_TRUE(g.contains("__builtins__"));
}

TEST(RunCell, EmptyFilenameFallsBack) {
  py::gil_scoped_acquire gil;
  py::dict g;
  CellRequest request;
  request.code = "1/0";
  Result r = RunCell(g.ptr(), request);
  EXPECT_NE(r.error->find("File \"<cell>\""), std::string::npos) << *r.error;
}

// The fast split of the trailing expression must agree with the AST rule
// (the last statement is an expression) on every cell.
TEST(RunCell, TrailingExpressionSplitAgreesWithTheAstRule) {
  py::gil_scoped_acquire gil;
  py::dict helpers;
  py::exec(R"(
import ast
def reference(code):
    g = {}
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return (False, None)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    try:
        exec(compile(tree, "<r>", "exec"), g)
        value = eval(compile(last, "<r>", "eval"), g) if last else None
    except BaseException:
        return (False, None)
    return (True, None if value is None else repr(value))
)", helpers);
  const char* cases[] = {
      "x = 1", "x = 1\nx", "x = 1\nx == 1", "x = 1; x", "x: int = 5", "x = 1\nx += 1",
      "x = 1\nx <<= 1\nx", "x = 1\nx <= 2", "x = 1\nx != 3", "x = 1\nx >= 0",
      "for i in range(3):\n    i", "if True:\n    5\nelse:\n    6", "[i for i in range(3)]",
      "(lambda x: x)(3)", "(lambda: 1)()", "f = lambda: 1", "'a=b'", "'''multi\nline = 2'''",
      "d = {'a': 1}\nd['a']", "d = {}\nd['a'] = 2", "print('x'); 5", "x = (1,\n 2)\nx",
      "x = 1 \\\n + 2\nx", "# comment\n7\n# trailing comment\n", "@staticmethod\ndef g(): pass",
      "async def h(): pass", "(y := 4)", "match = 3\nmatch", "type(3)", "not False",
      "import os\nos.sep", "d = 1\ndel d", "1; 2", "  1", "x = 5 # comment = \nx",
      "s = 'it' 's'\ns", "b'\\x00' + b\"q\"", "f'{1+1}'", "'\\''", "x = (1,", "1 +",
      "\"\"\"doc\"\"\"", "x = 1\nx if x else 2", "t = 1,\nt", "a, b = 1, 2\na", "r'\\'' ",
      "while False: pass", "x = [1,\n     2]\nx[0:1]", "class C:\n    a = 1\nC.a", "x = 1\r\nx\r\n",
      "{'k': 'v'}", "{1, 2}", "print(1)\n\n\n", "if True: 3", "x = 2\n-x", "yield 1",
      "return 1", "await f()", "\xef\xbb\xbf" "1", "x = 1\n@x\ndef f(): pass",
      "x = '''a\n'''; x", "x = 1\nx ; ", "x = 3\nx // 2", "x = {}\nx |= {1: 2}\nx",
  };
  for (const char* code : cases) {
    py::dict g;
    Result r = RunIn(g, code);
    py::tuple expected = helpers["reference"](code);
    EXPECT_EQ(r.ok, expected[0].cast<bool>()) << code << "\n" << r.error.value_or("");
    std::optional<std::string> value;
    if (!expected[1].is_none()) value = expected[1].cast<std::string>();
    EXPECT_EQ(r.value, value) << code;
  }
}

TEST(RunCell, TrailingExpressionKeepsItsLineNumber) {
  py::gil_scoped_acquire gil;
  py::dict g;
  Result r = RunIn(g, "a = 1\n\nb = 2\n(a +\n 1 / 0)");
  EXPECT_NE(r.error->find("line 5"), std::string::npos) << *r.error;
  EXPECT_NE(r.error->find("1 / 0"), std::string::npos) << *r.error;
}

TEST(RunCell, ThreadsNeverCrossOutput) {
  constexpr int kThreads = 8;
  std::vector<Result> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &results] {
      py::gil_scoped_acquire gil;
      py::dict g;
      std::string code = "import time\nfor i in range(300):\n    print('T" + std::to_string(t) +
                         "', i)\n    time.sleep(0)\n";
      results[t] = RunIn(g, code);
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    std::string expected;
    for (int i = 0; i < 300; ++i) expected += "T" + std::to_string(t) + " " + std::to_string(i) + "\n";
    EXPECT_EQ(results[t].stdout_text, expected) << "thread " << t;
  }
}

TEST(RunCell, HostThreadsPrintToTheOriginalStdout) {
  py::gil_scoped_acquire gil;
  py::module_ sys = py::module_::import("sys");
  py::object saved = sys.attr("stdout");
  py::object host_out = py::module_::import("io").attr("StringIO")();
  sys.attr("stdout") = host_out;
  ASSERT_TRUE(InstallCellIo().ok());
  Result cell;
  {
    std::mutex started;
    py::gil_scoped_release release;
    std::thread runner([&] {
      py::gil_scoped_acquire inner;
      py::dict g;
      cell = RunIn(g, "import time\nfor i in range(50):\n    print('cell', i)\n    time.sleep(0)");
    });
    {
      py::gil_scoped_acquire inner;
      for (int i = 0; i < 50; ++i) {
        py::print("host", i);
        py::module_::import("time").attr("sleep")(0);
      }
    }
    runner.join();
  }
  sys.attr("stdout") = saved;
  std::string host_text = host_out.attr("getvalue")().cast<std::string>();
  EXPECT_NE(host_text.find("host 49\n"), std::string::npos);
  EXPECT_EQ(host_text.find("cell"), std::string::npos);
  EXPECT_EQ(cell.stdout_text.find("host"), std::string::npos);
  EXPECT_NE(cell.stdout_text.find("cell 49\n"), std::string::npos);
}

TEST(InstallCellIo, IsIdempotentAndRoutesAllThreeStreams) {
  py::gil_scoped_acquire gil;
  ASSERT_TRUE(InstallCellIo().ok());
  py::module_ sys = py::module_::import("sys");
  py::object out = sys.attr("stdout");
  ASSERT_TRUE(InstallCellIo().ok());
  EXPECT_TRUE(py::object(sys.attr("stdout")).is(out));
  EXPECT_EQ(py::str(py::type::of(sys.attr("stdin")).attr("__name__")).cast<std::string>(), "CellStream");
  EXPECT_EQ(py::str(py::type::of(sys.attr("stderr")).attr("__name__")).cast<std::string>(), "CellStream");
  // Outside a cell the router forwards attributes to the stream it replaced.
  EXPECT_FALSE(out.attr("encoding").is_none());
}

TEST(CapOutput, KeepsShortTextWhole) {
  EXPECT_EQ(CapOutput("hello", 10), "hello");
  EXPECT_EQ(CapOutput("hello", 5), "hello");
  EXPECT_EQ(CapOutput(std::string(1000, 'a'), 0), std::string(1000, 'a'));
}

TEST(CapOutput, KeepsHeadAndTailAndSaysHowMuchWasCut) {
  std::string text = std::string(50, 'h') + std::string(900, 'm') + std::string(50, 't');
  std::string out = CapOutput(text, 100);
  EXPECT_EQ(out.rfind(std::string(50, 'h'), 0), 0u);
  EXPECT_TRUE(EndsWith(out, std::string(50, 't')));
  EXPECT_EQ(out.find("mm"), std::string::npos);
  EXPECT_NE(out.find("900 of 1000 characters cut"), std::string::npos) << out;
}

TEST(CapOutput, CountsCodePointsAndNeverSplitsOne) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "\xc3\xa9";  // é
  std::string out = CapOutput(text, 10);
  EXPECT_EQ(out.rfind("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\n", 0), 0u);
  EXPECT_NE(out.find("990 of 1000 characters cut"), std::string::npos) << out;
  EXPECT_TRUE(EndsWith(out, "\n\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"));
}

TEST(BoundedText, StreamedChunksMatchOneShotCap) {
  BoundedText bounded(64);
  std::string all;
  for (int i = 0; i < 100000; ++i) {
    std::string chunk = std::to_string(i) + "\n";
    bounded.Append(chunk);
    all += chunk;
  }
  EXPECT_EQ(bounded.Text(), CapOutput(all, 64));
  EXPECT_TRUE(bounded.cut());
  EXPECT_EQ(bounded.total_chars(), all.size());
}

TEST(BoundedText, OneHugeChunk) {
  BoundedText bounded(10);
  bounded.Append("0123456789ABCDEFGHIJ");
  EXPECT_EQ(bounded.Text(), CapOutput("0123456789ABCDEFGHIJ", 10));
  EXPECT_EQ(bounded.Text().rfind("01234", 0), 0u);
  EXPECT_TRUE(EndsWith(bounded.Text(), "FGHIJ"));
}

}  // namespace
}  // namespace dolsot
