// Tests for the ty type gate (core/type_gate.h): failing open without ty, a
// hung or crashing ty, parsing and filtering ty's output (with a scripted
// fake ty), and real checks against examples/toolbox/mytools when ty exists.
#include "core/type_gate.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace dolsot {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string RepoRoot() {
  return fs::path(__FILE__).parent_path().parent_path().parent_path().string();
}

std::string ToolboxDir() { return RepoRoot() + "/examples/toolbox"; }

// A scratch directory for fake ty scripts, removed after each test.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = fs::temp_directory_path().string() + "/dolsot-gate-test-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  // Writes an executable /bin/sh script and returns its path.
  std::string Script(const std::string& name, const std::string& body) const {
    std::string file = path_ + "/" + name;
    std::ofstream(file) << "#!/bin/sh\n" << body;
    chmod(file.c_str(), 0755);
    return file;
  }

 private:
  std::string path_;
};

TypeCheckRequest MytoolsRequest(std::string_view code) {
  TypeCheckRequest request;
  request.code = code;
  request.toolboxes = {{"mt", "mytools"}};
  request.python_path = {ToolboxDir()};
  request.deadline = Clock::now() + std::chrono::seconds(30);
  return request;
}

// ------------------------------------------------- failing open, no ty ----

TEST(TypeGateWithoutTy, MissingBinaryPathFailsOpen) {
  TypeCheckRequest request = MytoolsRequest("mt.add(1, '2')");
  request.ty_bin = "/nonexistent/dir/ty";
  TypeCheckOutcome out = TypeCheckCell(request);
  EXPECT_FALSE(out.ran);
  EXPECT_TRUE(out.diagnostics.empty());
  EXPECT_NE(out.note.find("ty not found at /nonexistent/dir/ty"), std::string::npos) << out.note;
}

TEST(TypeGateWithoutTy, BinaryNotOnPathFailsOpen) {
  TypeCheckRequest request = MytoolsRequest("mt.add(1, '2')");
  request.ty_bin = "dolsot-no-such-ty-binary";
  TypeCheckOutcome out = TypeCheckCell(request);
  EXPECT_FALSE(out.ran);
  EXPECT_NE(out.note.find("not found on PATH"), std::string::npos) << out.note;
}

TEST(TypeGateWithoutTy, NoToolboxSkipsTheCheck) {
  TypeCheckRequest request = MytoolsRequest("len(5)");
  request.toolboxes.clear();
  TypeCheckOutcome out = TypeCheckCell(request);
  EXPECT_FALSE(out.ran);
  EXPECT_NE(out.note.find("no toolbox"), std::string::npos);
}

// A cell that cannot reach a toolbox is not checked: ty (here a script that
// leaves a marker) never starts, by either entry point.
TEST(TypeGateSkip, CellsThatCannotReachAToolboxDoNotRunTy) {
  for (const char* code : {"1+1", "x = [n * 2 for n in range(3)]\nprint(x)", "mtx = 1\nmt_2",
                           "len(5)\n'a'.join(1)"}) {
    ScratchDir dir;
    std::string marker = dir.path() + "/ran";
    TypeCheckRequest request = MytoolsRequest(code);
    request.ty_bin = dir.Script("ty", "touch " + marker + "\nexit 0\n");
    TypeCheckOutcome out = TypeCheckCell(request);
    EXPECT_FALSE(out.ran) << code;
    EXPECT_NE(out.note.find("cannot reach a toolbox"), std::string::npos) << out.note;
    TyServer server;
    server.Prefetch(request);
    out = server.Check(request);
    EXPECT_FALSE(out.ran) << code;
    EXPECT_FALSE(fs::exists(marker)) << code;
  }
}

struct ReachCase {
  const char* name;
  const char* code;
  const char* alias;
  const char* module;
};

class TypeGateNoSkip : public ::testing::TestWithParam<ReachCase> {};

// Any way a cell might reach a toolbox runs ty.
TEST_P(TypeGateNoSkip, RunsTy) {
  ScratchDir dir;
  std::string marker = dir.path() + "/ran";
  TypeCheckRequest request = MytoolsRequest(GetParam().code);
  request.toolboxes = {{GetParam().alias, GetParam().module}};
  request.ty_bin = dir.Script("ty", "touch " + marker + "\nexit 0\n");
  TypeCheckOutcome out = TypeCheckCell(request);
  EXPECT_TRUE(out.ran) << out.note;
  EXPECT_TRUE(fs::exists(marker));
}

INSTANTIATE_TEST_SUITE_P(
    Reaches, TypeGateNoSkip,
    ::testing::Values(ReachCase{"Alias", "mt.add(1, 2)", "mt", "mytools"},
                      ReachCase{"AliasAfterANewline", "x = 1\n(mt)", "mt", "mytools"},
                      ReachCase{"Import", "import mytools\nmytools.add(1, 'x')", "mt", "mytools"},
                      ReachCase{"FromImport", "from mytools import add", "mt", "mytools"},
                      ReachCase{"DunderImport", "__import__('mytools')", "mt", "mytools"},
                      // NFKC folds the fullwidth letters into the alias `mt`.
                      ReachCase{"NonAscii", "\xef\xbd\x8d\xef\xbd\x94.add(1, 'x')", "mt", "mytools"},
                      ReachCase{"NonAsciiString", "s = '\xc3\xa9'", "mt", "mytools"},
                      // Builtins' stubs live in stdlib modules: ty must decide.
                      ReachCase{"StdlibNamedModule", "len(5)", "b", "builtins"},
                      ReachCase{"StdlibNamedPackage", "x = 1", "p", "os.path"},
                      ReachCase{"TypeshedDirNamedModule", "x = 1", "s", "stdlib"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(TypeGateWithoutTy, PassedDeadlineFailsOpenWithoutRunningTy) {
  ScratchDir dir;
  std::string marker = dir.path() + "/ran";
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 2)");
  request.ty_bin = dir.Script("ty", "touch " + marker + "\n");
  request.deadline = Clock::now() - std::chrono::seconds(1);
  TypeCheckOutcome out = TypeCheckCell(request);
  EXPECT_FALSE(out.ran);
  EXPECT_NE(out.note.find("deadline"), std::string::npos) << out.note;
  EXPECT_FALSE(fs::exists(marker));
}

TEST(TypeGateWithoutTy, HungTyIsKilledAtTheDeadlineAndReaped) {
  ScratchDir dir;
  std::string pid_file = dir.path() + "/pid";
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 2)");
  request.ty_bin = dir.Script("ty", "echo $$ > " + pid_file + "\nexec sleep 60\n");
  request.deadline = Clock::now() + std::chrono::milliseconds(500);
  TypeCheckOutcome out = TypeCheckCell(request);
  EXPECT_FALSE(out.ran);
  EXPECT_NE(out.note.find("deadline"), std::string::npos) << out.note;
  std::ifstream in(pid_file);
  pid_t pid = 0;
  ASSERT_TRUE(in >> pid) << "the fake ty never started";
  // Reaped: the pid no longer names a process (not even a zombie).
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(TypeGateWithoutTy, CrashingTyFailsOpenWithItsError) {
  ScratchDir dir;
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 2)");
  request.ty_bin = dir.Script("ty", "echo 'thread main panicked at oops' >&2\nexit 101\n");
  TypeCheckOutcome out = TypeCheckCell(request);
  EXPECT_FALSE(out.ran);
  EXPECT_NE(out.note.find("status 101"), std::string::npos) << out.note;
  EXPECT_NE(out.note.find("panicked"), std::string::npos) << out.note;
}

TEST(TypeGateWithoutTy, TempProjectIsRemoved) {
  ScratchDir dir;
  ScratchDir tmp;
  const char* old = std::getenv("TMPDIR");
  std::string saved = old ? old : "";
  setenv("TMPDIR", tmp.path().c_str(), 1);
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 2)");
  request.ty_bin = dir.Script("ty", "exit 0\n");
  TypeCheckOutcome out = TypeCheckCell(request);
  if (old) setenv("TMPDIR", saved.c_str(), 1); else unsetenv("TMPDIR");
  EXPECT_TRUE(out.ran) << out.note;
  EXPECT_TRUE(fs::is_empty(tmp.path()));
}

// A fake ty printing canned "full"-format output about the checked file (its
// last argument). The prelude for {mt: mytools} and no session names is two
// lines, so cell line N is file line N + 2.
constexpr const char* kCannedOutput = R"SH(for a; do f=$a; done
cat <<EOF
error[invalid-argument-type]: Argument to function \`add\` is incorrect
 --> $f:3:11
  |
3 | mt.add(1, "x")
  |           ^^^ Expected \`int\`, found \`Literal["x"]\`
info: Function defined here
  --> /somewhere/site-packages/mytools/__init__.py:54:5
   |
54 | def add(a: int, b: int) -> int:
   |     ^^^         ------ Parameter declared here

error[too-many-positional-arguments]: Too many positional arguments to function \`own\`: expected 1, got 2
 --> $f:4:9
  |
4 | own(1, 2)
  |        ^
info: Function signature here
 --> $f:1:5

error[unresolved-reference]: Name \`undefined\` used when not defined
 --> $f:5:1

error[parameter-already-assigned]: Multiple values provided for parameter \`a\` of function \`add\`
 --> $f:6:11
  |
6 | mt.add(1, a=2)
  |           ^^^

error[missing-attribute]: Module \`mytools\` has no member \`nosuch\`
 --> $f:7:1

error[missing-attribute]: Module \`os\` has no member \`nosuch\`
 --> $f:8:1

error[invalid-argument-type]: Argument to function \`add\` is incorrect
 --> $f:1:1
info: Function defined here
  --> /somewhere/mytools.py:1:1

Found 7 diagnostics
EOF
exit 1
)SH";

TEST(TypeGateWithoutTy, KeepsOnlyToolboxCallDiagnosticsMappedToTheCell) {
  ScratchDir dir;
  TypeCheckRequest request = MytoolsRequest(
      "mt.add(1, \"x\")\nown(1, 2)\nundefined\nmt.add(1, a=2)\nmt.nosuch()\nos.nosuch()\n");
  request.ty_bin = dir.Script("ty", kCannedOutput);
  TypeCheckOutcome out = TypeCheckCell(request);
  ASSERT_TRUE(out.ran) << out.note;
  ASSERT_EQ(out.diagnostics.size(), 3u) << out.FormatError();
  EXPECT_EQ(out.diagnostics[0].rule, "invalid-argument-type");
  EXPECT_EQ(out.diagnostics[0].line, 1);
  EXPECT_EQ(out.diagnostics[0].column, 11);
  EXPECT_EQ(out.diagnostics[0].message,
            "Argument to function `add` is incorrect: Expected `int`, found `Literal[\"x\"]`");
  EXPECT_EQ(out.diagnostics[1].rule, "parameter-already-assigned");
  EXPECT_EQ(out.diagnostics[1].line, 4);
  EXPECT_EQ(out.diagnostics[2].rule, "missing-attribute");
  EXPECT_EQ(out.diagnostics[2].line, 5);
  EXPECT_EQ(out.FormatError().substr(0, 27), "type gate: line 1, col 11: ");
}

// ------------------------------------------------------------ with ty ----

// The ty binary to test with: DOLSOT_TY_BIN, else `ty` on PATH; "" if none.
std::string FindTy() {
  const char* env = std::getenv("DOLSOT_TY_BIN");
  if (env && *env) return access(env, X_OK) == 0 ? env : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    std::string candidate = dirs.substr(start, end - start) + "/ty";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

// Every with-ty test runs twice: one `ty check` per cell (TypeCheckCell), and
// through a warm `ty server` (TyServer) shared by the test's checks.
class TypeGateWithTy : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ty_ = FindTy();
    if (ty_.empty()) {
      GTEST_SKIP() << "ty is not installed (pip install ty==0.0.104, or set DOLSOT_TY_BIN)";
    }
  }
  TypeCheckOutcome Check(std::string_view code, std::vector<std::string> session_names = {}) {
    TypeCheckRequest request = MytoolsRequest(code);
    request.ty_bin = ty_;
    request.session_names = std::move(session_names);
    return GetParam() ? server_.Check(request) : TypeCheckCell(request);
  }
  std::string ty_;
  TyServer server_;
};

INSTANTIATE_TEST_SUITE_P(OneShotAndServer, TypeGateWithTy, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Server" : "OneShot"; });

TEST_P(TypeGateWithTy, WellTypedCellPasses) {
  TypeCheckOutcome out = Check("rows = mt.load('orders')\nmt.top(rows, 2)\nmt.add(1, 2)\n");
  EXPECT_TRUE(out.ran) << out.note;
  EXPECT_TRUE(out.diagnostics.empty()) << out.FormatError();
}

TEST_P(TypeGateWithTy, WrongArgumentTypeIsRejectedAtItsLineAndColumn) {
  TypeCheckOutcome out = Check("a = 1\nb = mt.add(a, \"2\")\n");
  ASSERT_TRUE(out.ran) << out.note;
  ASSERT_EQ(out.diagnostics.size(), 1u) << out.FormatError();
  EXPECT_EQ(out.diagnostics[0].rule, "invalid-argument-type");
  EXPECT_EQ(out.diagnostics[0].line, 2);
  EXPECT_EQ(out.diagnostics[0].column, 15);
  EXPECT_NE(out.diagnostics[0].message.find("Expected `int`"), std::string::npos);
}

TEST_P(TypeGateWithTy, WrongArgumentCountsAreRejected) {
  TypeCheckOutcome out = Check("mt.add(1)\nmt.add(1, 2, 3)\nmt.load(name='x', extra=1)\n");
  ASSERT_TRUE(out.ran) << out.note;
  ASSERT_EQ(out.diagnostics.size(), 3u) << out.FormatError();
  EXPECT_EQ(out.diagnostics[0].rule, "missing-argument");
  EXPECT_EQ(out.diagnostics[1].rule, "too-many-positional-arguments");
  EXPECT_EQ(out.diagnostics[2].rule, "unknown-argument");
  EXPECT_EQ(out.diagnostics[2].line, 3);
}

TEST_P(TypeGateWithTy, UnknownToolboxAttributeIsRejected) {
  TypeCheckOutcome out = Check("mt.no_such_function(1)\n");
  ASSERT_EQ(out.diagnostics.size(), 1u) << out.FormatError() << out.note;
  EXPECT_EQ(out.diagnostics[0].rule, "missing-attribute");
}

TEST_P(TypeGateWithTy, NamesFromEarlierCellsCauseNoFalseRejection) {
  TypeCheckOutcome out = Check("mt.top(df, n)\nmt.add(n, n)\nprint(df.whatever)\n", {"df", "n"});
  EXPECT_TRUE(out.ran) << out.note;
  EXPECT_TRUE(out.diagnostics.empty()) << out.FormatError();
}

TEST_P(TypeGateWithTy, ProblemsOutsideToolboxCallsAreLeftToRuntime) {
  TypeCheckOutcome out = Check(
      "import numpy_that_is_not_installed\nx = undefined_name\n"
      "def own(a):\n    return a\nown(1, 2)\nlen(5)\n");
  EXPECT_TRUE(out.ran) << out.note;
  EXPECT_TRUE(out.diagnostics.empty()) << out.FormatError();
}

TEST_P(TypeGateWithTy, ConcurrentChecksDoNotInterfere) {
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

TEST_P(TypeGateWithTy, UnusableSearchPathEntriesAreSkipped) {
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 'x')\n");
  request.ty_bin = ty_;
  request.python_path = {"/nonexistent/dir", "/usr/lib/python311.zip", "",
                         ToolboxDir() + "/../toolbox/", ToolboxDir()};
  TypeCheckOutcome out = GetParam() ? server_.Check(request) : TypeCheckCell(request);
  ASSERT_TRUE(out.ran) << out.note;
  EXPECT_EQ(out.diagnostics.size(), 1u) << out.FormatError();
}

// A host's sys.path holds the stdlib's own directory; its typing.py must not
// shadow typeshed's (the prelude's Any would stop being Any).
TEST_P(TypeGateWithTy, TheInterpretersStdlibDirIsNotASearchPath) {
  ScratchDir stdlib;
  std::ofstream(stdlib.path() + "/typing.py") << "class Any:\n    pass\n";
  std::ofstream(stdlib.path() + "/os.py") << "\n";
  TypeCheckRequest request = MytoolsRequest("[row['id'] for row in mt.top(rows, n)]\n");
  request.ty_bin = ty_;
  request.session_names = {"rows", "n"};
  request.python_path = {stdlib.path(), ToolboxDir()};
  TypeCheckOutcome out = GetParam() ? server_.Check(request) : TypeCheckCell(request);
  ASSERT_TRUE(out.ran) << out.note;
  EXPECT_TRUE(out.diagnostics.empty()) << out.FormatError();
}

TEST_P(TypeGateWithTy, ManyCellsInARowKeepTheirOwnVerdicts) {
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

int OpenFdCount() {
  int count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

TEST(TypeGateResources, NoFdOrChildOrTempDirOutlivesTheChecks) {
  std::string ty = FindTy();
  if (ty.empty()) GTEST_SKIP() << "ty is not installed (pip install ty==0.0.104)";
  ScratchDir tmp;
  const char* old = std::getenv("TMPDIR");
  std::string saved = old ? old : "";
  setenv("TMPDIR", tmp.path().c_str(), 1);
  int fds_before = OpenFdCount();
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 'x')\n");
  request.ty_bin = ty;
  {
    TyServer server;
    for (int i = 0; i < 3; ++i) EXPECT_EQ(server.Check(request).diagnostics.size(), 1u);
    EXPECT_FALSE(fs::is_empty(tmp.path()));  // the server's workspace, while it lives
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(TypeCheckCell(request).diagnostics.size(), 1u);
  if (old) setenv("TMPDIR", saved.c_str(), 1); else unsetenv("TMPDIR");
  EXPECT_EQ(OpenFdCount(), fds_before);
  EXPECT_TRUE(fs::is_empty(tmp.path()));
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);  // no child left, reaped or not
  EXPECT_EQ(errno, ECHILD);
}

TEST(TyServerPrefetch, APrefetchedServerGivesTheSameVerdicts) {
  std::string ty = FindTy();
  if (ty.empty()) GTEST_SKIP() << "ty is not installed (pip install ty==0.0.104)";
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
TEST(TyServerOwnership, AForkedCopyDoesNotKillTheParentsServer) {
  std::string ty = FindTy();
  if (ty.empty()) GTEST_SKIP() << "ty is not installed (pip install ty==0.0.104)";
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

// ------------------------------------------------- TyServer without ty ----

TEST(TyServerWithoutTy, MissingBinaryFailsOpen) {
  TyServer server;
  TypeCheckRequest request = MytoolsRequest("mt.add(1, '2')");
  request.ty_bin = "/nonexistent/dir/ty";
  TypeCheckOutcome out = server.Check(request);
  EXPECT_FALSE(out.ran);
  EXPECT_NE(out.note.find("ty not found"), std::string::npos) << out.note;
}

TEST(TyServerWithoutTy, SilentServerIsKilledAtTheDeadlineAndReaped) {
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
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(TyServerWithoutTy, APrefetchedServerThatFailsIsStartedOnceMore) {
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
  std::ifstream in(count_file);
  int starts = 0;
  for (std::string line; std::getline(in, line);) ++starts;
  EXPECT_EQ(starts, 2);  // the prefetched one, then one retry
}

TEST(TyServerWithoutTy, ServerThatExitsFailsOpenAndIsRetriedNextCell) {
  ScratchDir dir;
  std::string count_file = dir.path() + "/starts";
  TyServer server;
  TypeCheckRequest request = MytoolsRequest("mt.add(1, 2)");
  request.ty_bin = dir.Script("ty", "echo start >> " + count_file + "\nexit 3\n");
  TypeCheckOutcome first = server.Check(request);
  TypeCheckOutcome second = server.Check(request);
  EXPECT_FALSE(first.ran);
  EXPECT_FALSE(second.ran);
  EXPECT_NE(first.note.find("ty server"), std::string::npos) << first.note;
  std::ifstream in(count_file);
  int starts = 0;
  for (std::string line; std::getline(in, line);) ++starts;
  EXPECT_EQ(starts, 2);
}

}  // namespace
}  // namespace dolsot
