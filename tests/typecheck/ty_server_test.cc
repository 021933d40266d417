// Tests for the type gate (typecheck/ty_server.h): failing open without ty
// or with a broken one (scripted fake servers), and real checks against
// examples/toolbox/mytools when ty is installed.
#include "typecheck/ty_server.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/typecheck/typecheck_test_support.h"

namespace dolsot {
namespace {

using namespace typecheck_testing;

// ------------------------------------------------------ failing open ----

TEST(TypeGateWithoutTy, MissingBinaryPathFailsOpen) {
  TyServer server;
  TypeCheckRequest request = MytoolsRequest("mt.add(1, '2')");
  request.ty_bin = "/nonexistent/dir/ty";
  TypeCheckOutcome out = server.Check(request);
  EXPECT_FALSE(out.ran);
  EXPECT_TRUE(out.diagnostics.empty());
  EXPECT_NE(out.note.find("ty not found at /nonexistent/dir/ty"), std::string::npos) << out.note;
}

TEST(TypeGateWithoutTy, BinaryNotOnPathFailsOpen) {
  TyServer server;
  TypeCheckRequest request = MytoolsRequest("mt.add(1, '2')");
  request.ty_bin = "dolsot-no-such-ty-binary";
  TypeCheckOutcome out = server.Check(request);
  EXPECT_FALSE(out.ran);
  EXPECT_NE(out.note.find("not found beside the interpreter or on PATH"), std::string::npos)
      << out.note;
}

TEST(TypeGateWithoutTy, NoToolboxSkipsTheCheck) {
  TyServer server;
  TypeCheckRequest request = MytoolsRequest("len(5)");
  request.toolboxes.clear();
  TypeCheckOutcome out = server.Check(request);
  EXPECT_FALSE(out.ran);
  EXPECT_NE(out.note.find("no toolbox"), std::string::npos);
}

// A cell that cannot reach a toolbox is not checked: ty (here a script that
// leaves a marker) never starts. (Which cells: toolbox_reach_test.cc.)
TEST(TypeGateWithoutTy, CellsThatCannotReachAToolboxDoNotStartTy) {
  for (const char* code : {"1+1", "x = [n * 2 for n in range(3)]\nprint(x)", "mtx = 1\nmt_2"}) {
    ScratchDir dir;
    std::string marker = dir.path() + "/ran";
    TypeCheckRequest request = MytoolsRequest(code);
    request.ty_bin = dir.Script("ty", "touch " + marker + "\nexit 0\n");
    TyServer server;
    server.Prefetch(request);
    TypeCheckOutcome out = server.Check(request);
    EXPECT_FALSE(out.ran) << code;
    EXPECT_NE(out.note.find("cannot reach a toolbox"), std::string::npos) << out.note;
    EXPECT_FALSE(fs::exists(marker)) << code;
  }
}

TEST(TypeGateWithoutTy, ACellThatMayReachAToolboxStartsTy) {
  ScratchDir dir;
  std::string marker = dir.path() + "/ran";
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 2)");
  request.ty_bin = dir.Script("ty", "touch " + marker + "\nexit 0\n");
  TyServer server;
  TypeCheckOutcome out = server.Check(request);
  EXPECT_FALSE(out.ran);  // the fake exits at once
  EXPECT_TRUE(fs::exists(marker));
}

TEST(TypeGateWithoutTy, PassedDeadlineFailsOpenWithoutStartingTy) {
  ScratchDir dir;
  std::string marker = dir.path() + "/ran";
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 2)");
  request.ty_bin = dir.Script("ty", "touch " + marker + "\n");
  request.deadline = Clock::now() - std::chrono::seconds(1);
  TyServer server;
  TypeCheckOutcome out = server.Check(request);
  EXPECT_FALSE(out.ran);
  EXPECT_NE(out.note.find("deadline"), std::string::npos) << out.note;
  EXPECT_FALSE(fs::exists(marker));
}

TEST(TypeGateWithoutTy, SilentServerIsKilledAtTheDeadlineAndReaped) {
  ScratchDir dir;
  std::string pid_file = dir.path() + "/pid";
  TyServer server;
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 2)");
  request.ty_bin = dir.Script("ty", "echo $$ > " + pid_file + "\nexec sleep 60\n");
  request.deadline = Clock::now() + std::chrono::milliseconds(500);
  TypeCheckOutcome out = server.Check(request);
  EXPECT_FALSE(out.ran);
  EXPECT_NE(out.note.find("deadline"), std::string::npos) << out.note;
  std::ifstream in(pid_file);
  pid_t pid = 0;
  ASSERT_TRUE(in >> pid) << "the fake ty server never started";
  // Reaped: the pid no longer names a process (not even a zombie).
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(TypeGateWithoutTy, ServerAnsweringGarbageFailsOpen) {
  ScratchDir dir;
  TyServer server;
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 2)");
  request.ty_bin = dir.Script("ty", "printf 'Content-Length: 5\\r\\n\\r\\nhello'\nexec sleep 60\n");
  TypeCheckOutcome out = server.Check(request);
  EXPECT_FALSE(out.ran);
  EXPECT_NE(out.note.find("malformed JSON"), std::string::npos) << out.note;
}

TEST(TypeGateWithoutTy, APrefetchedServerThatFailsIsStartedOnceMore) {
  ScratchDir dir;
  std::string count_file = dir.path() + "/starts";
  TyServer server;
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 2)");
  request.ty_bin = dir.Script("ty", "echo start >> " + count_file + "\nexit 3\n");
  server.Prefetch(request);
  server.Prefetch(request);  // already started: no second server
  TypeCheckOutcome out = server.Check(request);
  EXPECT_FALSE(out.ran);
  EXPECT_NE(out.note.find("ty server"), std::string::npos) << out.note;
  EXPECT_EQ(LineCount(count_file), 2);  // the prefetched one, then one retry
}

TEST(TypeGateWithoutTy, ServerThatExitsFailsOpenAndIsRetriedNextCell) {
  ScratchDir dir;
  std::string count_file = dir.path() + "/starts";
  TyServer server;
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 2)");
  request.ty_bin = dir.Script("ty", "echo start >> " + count_file + "\nexit 3\n");
  TypeCheckOutcome first = server.Check(request);
  TypeCheckOutcome second = server.Check(request);
  EXPECT_FALSE(first.ran);
  EXPECT_FALSE(second.ran);
  EXPECT_NE(first.note.find("ty server exited"), std::string::npos) << first.note;
  EXPECT_EQ(LineCount(count_file), 2);
}

// -------------------------------------------------------------- with ty ----

class TypeGateWithTy : public ::testing::Test {
 protected:
  void SetUp() override {
    ty_ = FindTy();
    if (ty_.empty()) GTEST_SKIP() << kNoTy;
  }
  TypeCheckRequest Request(std::string_view code, std::vector<std::string> session_names = {}) {
    TypeCheckRequest request = MytoolsRequest(code);
    request.ty_bin = ty_;
    request.session_names = std::move(session_names);
    return request;
  }
  TypeCheckOutcome Check(std::string_view code, std::vector<std::string> session_names = {}) {
    return server_.Check(Request(code, std::move(session_names)));
  }
  std::string ty_;
  TyServer server_;
};

TEST_F(TypeGateWithTy, WellTypedCellPasses) {
  TypeCheckOutcome out = Check("rows = mt.load('orders')\nmt.top(rows, 2)\nmt.add(1, 2)\n");
  EXPECT_TRUE(out.ran) << out.note;
  EXPECT_TRUE(out.diagnostics.empty()) << out.FormatError();
}

TEST_F(TypeGateWithTy, WrongArgumentTypeIsRejectedAtItsLineAndColumn) {
  TypeCheckOutcome out = Check("a = 1\nb = mt.add(a, \"2\")\n");
  ASSERT_TRUE(out.ran) << out.note;
  ASSERT_EQ(out.diagnostics.size(), 1u) << out.FormatError();
  EXPECT_EQ(out.diagnostics[0].rule, "invalid-argument-type");
  EXPECT_EQ(out.diagnostics[0].line, 2);
  EXPECT_EQ(out.diagnostics[0].column, 15);
  EXPECT_NE(out.diagnostics[0].message.find("Expected `int`"), std::string::npos);
  EXPECT_EQ(out.FormatError().substr(0, 27), "type gate: line 2, col 15: ");
}

// Columns count code points, not bytes: `é` is one column.
TEST_F(TypeGateWithTy, ColumnsCountCodePoints) {
  TypeCheckOutcome out = Check("s = '\xc3\xa9'; mt.add(s, 1)\n");
  ASSERT_EQ(out.diagnostics.size(), 1u) << out.FormatError() << out.note;
  EXPECT_EQ(out.diagnostics[0].column, 17);
}

TEST_F(TypeGateWithTy, WrongArgumentCountsAreRejected) {
  TypeCheckOutcome out = Check("mt.add(1)\nmt.add(1, 2, 3)\nmt.load(name='x', extra=1)\n");
  ASSERT_TRUE(out.ran) << out.note;
  ASSERT_EQ(out.diagnostics.size(), 3u) << out.FormatError();
  EXPECT_EQ(out.diagnostics[0].rule, "missing-argument");
  EXPECT_EQ(out.diagnostics[1].rule, "too-many-positional-arguments");
  EXPECT_EQ(out.diagnostics[2].rule, "unknown-argument");
  EXPECT_EQ(out.diagnostics[2].line, 3);
}

TEST_F(TypeGateWithTy, UnknownToolboxAttributeIsRejected) {
  TypeCheckOutcome out = Check("mt.no_such_function(1)\n");
  ASSERT_EQ(out.diagnostics.size(), 1u) << out.FormatError() << out.note;
  EXPECT_EQ(out.diagnostics[0].rule, "missing-attribute");
}

TEST_F(TypeGateWithTy, NamesFromEarlierCellsCauseNoFalseRejection) {
  TypeCheckOutcome out = Check("mt.top(df, n)\nmt.add(n, n)\nprint(df.whatever)\n", {"df", "n"});
  EXPECT_TRUE(out.ran) << out.note;
  EXPECT_TRUE(out.diagnostics.empty()) << out.FormatError();
}

TEST_F(TypeGateWithTy, ProblemsOutsideToolboxCallsAreLeftToRuntime) {
  TypeCheckOutcome out = Check(
      "import numpy_that_is_not_installed\nx = undefined_name\n"
      "def own(a):\n    return a\nown(1, 2)\nlen(5)\n");
  EXPECT_TRUE(out.ran) << out.note;
  EXPECT_TRUE(out.diagnostics.empty()) << out.FormatError();
}

// The prelude comes first, so a cell's `from __future__` import no longer
// opens the file; ty says so (ignored) and checks the rest all the same.
TEST_F(TypeGateWithTy, ACellOpeningWithAFutureImportIsStillChecked) {
  TypeCheckOutcome out = Check("from __future__ import annotations\nmt.add(1, '2')\n");
  ASSERT_TRUE(out.ran) << out.note;
  ASSERT_EQ(out.diagnostics.size(), 1u) << out.FormatError();
  EXPECT_EQ(out.diagnostics[0].line, 2);
}

TEST_F(TypeGateWithTy, ConcurrentChecksDoNotInterfere) {
  std::vector<TypeCheckOutcome> outs(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([this, i, &outs] {
      outs[i] = Check(i % 2 == 0 ? "mt.add(1, 2)\n" : "x = 1\nmt.add(x, 'bad')\n");
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(outs[i].ran) << outs[i].note;
    EXPECT_EQ(outs[i].diagnostics.size(), i % 2 == 0 ? 0u : 1u) << outs[i].FormatError();
  }
}

TEST_F(TypeGateWithTy, UnusableSearchPathEntriesAreSkipped) {
  TypeCheckRequest request = Request("mt.add(1, 'x')\n");
  request.python_path = {"/nonexistent/dir", "/usr/lib/python311.zip", "",
                         ToolboxDir() + "/../toolbox/", ToolboxDir()};
  TypeCheckOutcome out = server_.Check(request);
  ASSERT_TRUE(out.ran) << out.note;
  EXPECT_EQ(out.diagnostics.size(), 1u) << out.FormatError();
}

// A host's sys.path holds the stdlib's own directory; its typing.py must not
// shadow typeshed's (the prelude's Any would stop being Any).
TEST_F(TypeGateWithTy, TheInterpretersStdlibDirIsNotASearchPath) {
  ScratchDir stdlib;
  std::ofstream(stdlib.path() + "/typing.py") << "class Any:\n    pass\n";
  std::ofstream(stdlib.path() + "/os.py") << "\n";
  TypeCheckRequest request = Request("[row['id'] for row in mt.top(rows, n)]\n", {"rows", "n"});
  request.python_path = {stdlib.path(), ToolboxDir()};
  TypeCheckOutcome out = server_.Check(request);
  ASSERT_TRUE(out.ran) << out.note;
  EXPECT_TRUE(out.diagnostics.empty()) << out.FormatError();
}

TEST_F(TypeGateWithTy, ManyCellsInARowKeepTheirOwnVerdicts) {
  for (int i = 0; i < 5; ++i) {
    TypeCheckOutcome bad = Check("x = mt.load('orders')\nmt.top(x, n='3')\n");
    ASSERT_EQ(bad.diagnostics.size(), 1u) << bad.FormatError() << bad.note;
    EXPECT_EQ(bad.diagnostics[0].line, 2);
    EXPECT_EQ(bad.diagnostics[0].column, 11);
    TypeCheckOutcome good = Check("mt.top(x, n=3)\n", {"x"});
    EXPECT_TRUE(good.ran) << good.note;
    EXPECT_TRUE(good.diagnostics.empty()) << good.FormatError();
  }
}

// A ty.toml or pyproject.toml above the server's workspace (in $TMPDIR) is
// not read: it cannot turn the gate off or move the project root.
TEST_F(TypeGateWithTy, ConfigurationAboveTheWorkspaceIsIgnored) {
  ScratchDir tmp;
  std::ofstream(tmp.path() + "/ty.toml") << "[rules]\nall = \"ignore\"\n";
  std::ofstream(tmp.path() + "/pyproject.toml") << "[tool.ty.rules]\nall = \"ignore\"\n";
  ScopedEnv tmpdir("TMPDIR", tmp.path());
  TyServer server;
  TypeCheckOutcome out = server.Check(Request("mt.add(1, '2')\n"));
  ASSERT_TRUE(out.ran) << out.note;
  EXPECT_EQ(out.diagnostics.size(), 1u) << out.FormatError();
}

// Nor is the user's own ty configuration ($XDG_CONFIG_HOME/ty/ty.toml).
TEST_F(TypeGateWithTy, TheUsersTyConfigurationIsIgnored) {
  ScratchDir config;
  fs::create_directories(config.path() + "/ty");
  std::ofstream(config.path() + "/ty/ty.toml") << "[rules]\nall = \"ignore\"\n";
  ScopedEnv config_home("XDG_CONFIG_HOME", config.path());
  TyServer server;
  TypeCheckOutcome out = server.Check(Request("mt.add(1, '2')\n"));
  ASSERT_TRUE(out.ran) << out.note;
  EXPECT_EQ(out.diagnostics.size(), 1u) << out.FormatError();
}

// A toolbox found through a search directory whose name holds characters
// that need escaping (in TOML or JSON) or are unusual in paths is checked
// like any other: the gate must not fail open.
class TypeGateOddSearchDir : public TypeGateWithTy,
                             public ::testing::WithParamInterface<const char*> {};

TEST_P(TypeGateOddSearchDir, ToolboxThereIsStillChecked) {
  ScratchDir root;
  std::string dir = root.path() + "/" + GetParam();
  ASSERT_TRUE(fs::create_directories(dir));
  std::ofstream(dir + "/oddtools.py") << "def add(a: int, b: int) -> int:\n    return a + b\n";
  TypeCheckRequest request = Request("ot.add(1, '2')\n");
  request.toolboxes = {{"ot", "oddtools"}};
  request.python_path = {dir};
  TypeCheckOutcome out = server_.Check(request);
  ASSERT_TRUE(out.ran) << out.note;
  ASSERT_EQ(out.diagnostics.size(), 1u) << "the gate failed open for " << dir;
  EXPECT_EQ(out.diagnostics[0].rule, "invalid-argument-type");
}

INSTANTIATE_TEST_SUITE_P(Names, TypeGateOddSearchDir,
                         ::testing::Values("del\x7f" "char", "quote\"and\\backslash",
                                           "new\nline", "tab\tand space", "\xc3\xbcnicode",
                                           "per%25cent#hash?query", "[brackets]={braces}"),
                         [](const auto& info) { return "Case" + std::to_string(info.index); });

int OpenFdCount() {
  int count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

TEST(TypeGateResources, NoFdOrChildOrWorkspaceOutlivesTheServer) {
  std::string ty = FindTy();
  if (ty.empty()) GTEST_SKIP() << kNoTy;
  ScratchDir tmp;
  int fds_before = OpenFdCount();
  {
    ScopedEnv tmpdir("TMPDIR", tmp.path());
    TypeCheckRequest request = MytoolsRequest("mt.add(1, 'x')\n");
    request.ty_bin = ty;
    TyServer server;
    for (int i = 0; i < 3; ++i) EXPECT_EQ(server.Check(request).diagnostics.size(), 1u);
    EXPECT_FALSE(fs::is_empty(tmp.path()));  // the server's workspace, while it lives
    // A change of search path restarts the server: the old one is gone too.
    request.python_path.push_back(tmp.path());
    EXPECT_EQ(server.Check(request).diagnostics.size(), 1u);
  }
  EXPECT_EQ(OpenFdCount(), fds_before);
  EXPECT_TRUE(fs::is_empty(tmp.path()));
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);  // no child left, reaped or not
  EXPECT_EQ(errno, ECHILD);
}

TEST(TypeGatePrefetch, APrefetchedServerGivesTheSameVerdicts) {
  std::string ty = FindTy();
  if (ty.empty()) GTEST_SKIP() << kNoTy;
  TyServer server;
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 'x')\n");
  request.ty_bin = ty;
  server.Prefetch(request);
  TypeCheckOutcome out = server.Check(request);
  ASSERT_TRUE(out.ran) << out.note;
  EXPECT_EQ(out.diagnostics.size(), 1u) << out.FormatError();
  server.Prefetch(request);  // already up: nothing to do
  TypeCheckRequest good = MytoolsRequest("mt.add(1, 2)\n");
  good.ty_bin = ty;
  out = server.Check(good);
  EXPECT_TRUE(out.ran) << out.note;
  EXPECT_TRUE(out.diagnostics.empty()) << out.FormatError();
}

// A forked copy of a TyServer (a Python host that forks) that is destroyed
// leaves its parent's ty server and workspace alone.
TEST(TypeGateAfterFork, AForkedCopyDoesNotKillTheParentsServer) {
  std::string ty = FindTy();
  if (ty.empty()) GTEST_SKIP() << kNoTy;
  auto server = std::make_unique<TyServer>();
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 'x')\n");
  request.ty_bin = ty;
  ASSERT_EQ(server->Check(request).diagnostics.size(), 1u);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    server.reset();
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  TypeCheckOutcome out = server->Check(request);
  EXPECT_TRUE(out.ran) << out.note;
  EXPECT_EQ(out.diagnostics.size(), 1u) << out.FormatError();
}

// In a forked child the gate keeps working through a server the child
// starts, owns and reaps; the parent's server is untouched.
TEST(TypeGateAfterFork, AForkedChildChecksThroughAServerOfItsOwn) {
  std::string ty = FindTy();
  if (ty.empty()) GTEST_SKIP() << kNoTy;
  auto server = std::make_unique<TyServer>();
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 'x')\n");
  request.ty_bin = ty;
  ASSERT_EQ(server->Check(request).diagnostics.size(), 1u);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    TypeCheckOutcome first = server->Check(request);
    TypeCheckOutcome second = server->Check(request);
    server.reset();
    errno = 0;
    bool reaped = waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
    bool ok = first.ran && first.diagnostics.size() == 1 && second.ran &&
              second.diagnostics.size() == 1;
    _exit(!ok ? 1 : !reaped ? 2 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the child's checks failed open; 2: it left a child";
  TypeCheckOutcome out = server->Check(request);
  EXPECT_TRUE(out.ran) << out.note;
  EXPECT_EQ(out.diagnostics.size(), 1u) << out.FormatError();
}

}  // namespace
}  // namespace dolsot
