// One list of cases, run against both backends (Repl and InProcessSession)
// through the Backend interface: what a cell returns must not depend on where
// it ran. Each backend is one small factory trait; TYPED_TEST_SUITE runs every
// case once per trait.
//
// Left out by design, because the backends differ (each has its own suite):
// - Result::dropped: always empty in-process; the Repl lists the names a
//   checkpoint could not serialize (tests/backend_subprocess).
// - A crashing cell (os._exit, a segfault): the Repl loses only the session
//   process and rolls back; in-process it would take this test binary down.
// - A cell stuck in C code (time.sleep) past its deadline: the Repl kills it;
//   in-process it leaks a thread and the session refuses cells (kBusy) until
//   reset (tests/backend_inprocess).
#include <gtest/gtest.h>
#include <pybind11/embed.h>

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "backend_inprocess/in_process_session.h"
#include "backend_subprocess/repl.h"
#include "core/backend.h"
#include "core/cell_gate.h"
#include "core/memory_store.h"

namespace py = pybind11;

namespace dolsot {
namespace conformance {

// What a case may vary in the backend it opens. Every backend imports the
// example toolbox examples/toolbox/mytools under the alias "mytools".
struct BackendSpec {
  std::optional<double> timeout_seconds;  // the backend's default timeout
  std::optional<std::size_t> max_output;  // nullopt: the default cap
  CellGate gate;      // the caller's gate
  CellGate ast_gate;  // the gate in the AST gate's slot (runs first)
};

constexpr double kDefaultTimeout = 30.0;  // generous: a cell here never waits on it
const char* const kToolboxAlias = "mytools";
const char* const kToolboxModule = "mytools";

// The embedded host's sys.path with examples/toolbox first (idempotent); a
// Repl hands it to its worker as a Python host would.
std::vector<std::string> HostSysPathWithToolbox() {
  py::gil_scoped_acquire gil;
  py::list path = py::module_::import("sys").attr("path");
  if (!path.contains(DOLSOT_EXAMPLE_TOOLBOX_DIR)) path.insert(0, DOLSOT_EXAMPLE_TOOLBOX_DIR);
  std::vector<std::string> entries;
  for (py::handle entry : path) entries.push_back(py::str(entry).cast<std::string>());
  return entries;
}

ConfigOverrides ConfigFor(const BackendSpec& spec) {
  ConfigOverrides config;
  config.timeout_seconds = spec.timeout_seconds.value_or(kDefaultTimeout);
  config.max_output = spec.max_output;
  config.typecheck = false;  // ty is optional; the type gate has its own tests
  return config;
}

struct ReplFactory {
  static StatusOr<std::unique_ptr<Backend>> Make(const BackendSpec& spec) {
    ReplOptions options;
    options.toolboxes[kToolboxAlias] = kToolboxModule;
    options.config = ConfigFor(spec);
    options.store = std::make_shared<MemoryStore>();
    options.gate = spec.gate;
    options.ast_gate = spec.ast_gate;
    options.python_path = HostSysPathWithToolbox();
    // worker_command left empty: the build tree's dolsot-worker.
    auto repl = Repl::Create(std::move(options));
    if (!repl.ok()) return repl.status();
    return std::unique_ptr<Backend>(std::move(*repl));
  }
};

struct InProcessFactory {
  static StatusOr<std::unique_ptr<Backend>> Make(const BackendSpec& spec) {
    HostSysPathWithToolbox();  // makes mytools importable in this interpreter
    InProcessOptions options;
    options.toolboxes.emplace_back(kToolboxAlias, kToolboxModule);
    options.config = ConfigFor(spec);
    options.gate = spec.gate;
    options.ast_gate = spec.ast_gate;
    auto session = InProcessSession::Create(std::move(options));
    if (!session.ok()) return session.status();
    return std::unique_ptr<Backend>(std::move(*session));
  }
};

struct BackendNames {
  template <typename T>
  static std::string GetName(int) {
    if constexpr (std::is_same_v<T, ReplFactory>) return "Repl";
    if constexpr (std::is_same_v<T, InProcessFactory>) return "InProcess";
    return "Unknown";
  }
};

// The last non-empty line of an error ("ExcType: message" for an exception).
std::string LastLine(const std::optional<std::string>& text) {
  if (!text.has_value()) return "<no error>";
  std::string s = *text;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  std::size_t newline = s.rfind('\n');
  return newline == std::string::npos ? s : s.substr(newline + 1);
}

bool Contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// Nothing of the engine shows in a traceback: only the cell's own frames
// (named "<cell N>"), no Python source file, no dolsot module.
void ExpectNoEngineFrames(const std::optional<std::string>& error) {
  ASSERT_TRUE(error.has_value());
  EXPECT_FALSE(Contains(*error, ".py\"")) << *error;
  EXPECT_FALSE(Contains(*error, "dolsot")) << *error;
  EXPECT_FALSE(Contains(*error, "<frozen")) << *error;
}

std::set<std::string> SessionIds(Backend& backend) {
  std::set<std::string> ids;
  auto sessions = backend.Sessions();
  EXPECT_TRUE(sessions.ok()) << sessions.status().ToString();
  if (sessions.ok()) {
    for (const auto& info : *sessions) ids.insert(info.id);
  }
  return ids;
}

template <typename Factory>
class BackendConformance : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Open({})); }

  void TearDown() override {
    if (backend_) {
      EXPECT_TRUE(backend_->Close().ok());
    }
  }

  // Replaces the backend with one made from `spec`.
  bool Open(const BackendSpec& spec) {
    if (backend_) {
      EXPECT_TRUE(backend_->Close().ok());
    }
    backend_.reset();
    auto made = Factory::Make(spec);
    if (!made.ok()) {
      ADD_FAILURE() << "creating the backend: " << made.status().ToString();
      return false;
    }
    backend_ = std::move(*made);
    return true;
  }

  // Runs a cell that must be accepted (an OK status); a refused call fails
  // the test and yields a failed Result carrying the status.
  Result Run(std::string_view sid, std::string_view code,
             std::optional<double> timeout = std::nullopt) {
    RunOptions options;
    options.timeout_seconds = timeout;
    StatusOr<Result> result = backend_->Run(sid, code, options);
    EXPECT_TRUE(result.ok()) << "running `" << code << "`: " << result.status().ToString();
    if (result.ok()) return *std::move(result);
    Result refused;
    refused.ok = false;
    refused.exit_code = -1;
    refused.error = "status: " + result.status().ToString();
    return refused;
  }

  Backend& backend() { return *backend_; }

 private:
  std::unique_ptr<Backend> backend_;
};

using Backends = ::testing::Types<ReplFactory, InProcessFactory>;
TYPED_TEST_SUITE(BackendConformance, Backends, BackendNames);

TYPED_TEST(BackendConformance, TrailingExpressionIsTheValue) {
  Result r = this->Run("c", "x = 20\nx + 22");
  EXPECT_TRUE(r.ok) << r.error.value_or("");
  EXPECT_EQ(r.value, "42");
  EXPECT_EQ(r.stdout_text, "");
  EXPECT_EQ(r.error, std::nullopt);
  EXPECT_EQ(r.exit_code, kExitOk);
}

TYPED_TEST(BackendConformance, StatementsAndNoneGiveNoValue) {
  EXPECT_EQ(this->Run("c", "y = 1").value, std::nullopt);
  EXPECT_EQ(this->Run("c", "None").value, std::nullopt);
  EXPECT_EQ(this->Run("c", "print('p')").value, std::nullopt);
  EXPECT_EQ(this->Run("c", "for i in range(2):\n    y += i").value, std::nullopt);
  EXPECT_EQ(this->Run("c", "y").value, "2");
}

TYPED_TEST(BackendConformance, TrailingExpressionIsTheLastStatementOnly) {
  EXPECT_EQ(this->Run("c", "x = 1; x + 1").value, "2");
  EXPECT_EQ(this->Run("c", "x  # a comment after").value, "1");
  EXPECT_EQ(this->Run("c", "if x:\n    x + 5").value, std::nullopt);
  EXPECT_EQ(this->Run("c", "'text'").value, "'text'") << "the value is a repr, not str()";
  Result comment = this->Run("c", "# only a comment");
  EXPECT_TRUE(comment.ok) << comment.error.value_or("");
  EXPECT_EQ(comment.value, std::nullopt);
}

TYPED_TEST(BackendConformance, FailingReprGivesAPlaceholderValue) {
  Result r = this->Run(
      "c", "class Bad:\n    def __repr__(self):\n        raise ValueError('no repr')\nBad()");
  EXPECT_TRUE(r.ok) << "the cell itself ran: " << r.error.value_or("");
  ASSERT_TRUE(r.value.has_value());
  EXPECT_TRUE(Contains(*r.value, "Bad") && Contains(*r.value, "ValueError: no repr")) << *r.value;
  EXPECT_EQ(this->Run("c", "Bad.__name__").value, "'Bad'") << "the cell's statements ran";
}

TYPED_TEST(BackendConformance, UnicodeSurvivesOutputAndValue) {
  Result r = this->Run("c", "word = '\ub3cc\uc1a5'\nprint(word, '\U0001f35a')\nword");
  EXPECT_TRUE(r.ok) << r.error.value_or("");
  EXPECT_EQ(r.stdout_text, "\xeb\x8f\x8c\xec\x86\xa5 \xf0\x9f\x8d\x9a\n");
  EXPECT_EQ(r.value, "'\xeb\x8f\x8c\xec\x86\xa5'");
}

TYPED_TEST(BackendConformance, StateIsKeptAcrossCells) {
  EXPECT_TRUE(this->Run("c", "def double(v):\n    return 2 * v\nitems = [1, 2]").ok);
  EXPECT_TRUE(this->Run("c", "items.append(double(21))").ok);
  EXPECT_EQ(this->Run("c", "items").value, "[1, 2, 42]");
}

TYPED_TEST(BackendConformance, SessionsAreSeparate) {
  EXPECT_TRUE(this->Run("one", "only_in_one = 1").ok);
  Result other = this->Run("two", "only_in_one");
  EXPECT_FALSE(other.ok);
  EXPECT_EQ(LastLine(other.error), "NameError: name 'only_in_one' is not defined");
}

TYPED_TEST(BackendConformance, PrintIsCapturedWithStderr) {
  Result r = this->Run("c", "import sys\nprint('out')\nsys.stderr.write('err\\n')\n7");
  EXPECT_EQ(r.stdout_text, "out\nerr\n");
  EXPECT_EQ(r.value, "7");
}

TYPED_TEST(BackendConformance, SyntaxErrorIsAFailedResult) {
  EXPECT_TRUE(this->Run("c", "before = 1").ok);
  Result r = this->Run("c", "ok = 1\nx = = 1");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, kExitFailure);
  EXPECT_EQ(r.value, std::nullopt);
  EXPECT_EQ(LastLine(r.error).rfind("SyntaxError: ", 0), 0u) << r.error.value_or("");
  EXPECT_TRUE(Contains(r.error.value_or(""), "line 2")) << r.error.value_or("");
  EXPECT_FALSE(Contains(r.error.value_or(""), "Traceback")) << r.error.value_or("");
  ExpectNoEngineFrames(r.error);
  EXPECT_EQ(r.held, std::vector<std::string>{"before"}) << "nothing of the cell ran";
}

TYPED_TEST(BackendConformance, InvalidUtf8CodeIsAFailedResult) {
  Result r = this->Run("c", "x = '\xff\xfe'");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, kExitFailure);
  EXPECT_TRUE(Contains(r.error.value_or(""), "UTF-8")) << r.error.value_or("");
  EXPECT_EQ(this->Run("c", "'x' in globals()").value, "False");
}

TYPED_TEST(BackendConformance, ExceptionShowsOnlyTheCellsFrames) {
  Result r = this->Run("c", "def f():\n    return 1 / 0\nprint('before')\nf()");
  EXPECT_EQ(r.stdout_text, "before\n") << "output up to the exception is kept";
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, kExitFailure);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->rfind("Traceback (most recent call last):", 0), 0u) << *r.error;
  EXPECT_TRUE(Contains(*r.error, "return 1 / 0")) << *r.error;
  EXPECT_TRUE(Contains(*r.error, "File \"<cell")) << *r.error;
  EXPECT_EQ(LastLine(r.error), "ZeroDivisionError: division by zero");
  ExpectNoEngineFrames(r.error);
  // The definition before the failing line stays.
  EXPECT_EQ(r.held, std::vector<std::string>{"f"});
}

// One name on both backends: "<cell N>", N counting the session's cells.
// (In-process the code objects also carry the session, " of c", so that
// sessions sharing the interpreter never show each other's lines.)
TYPED_TEST(BackendConformance, TracebacksNameTheSessionsCellsAlike) {
  EXPECT_TRUE(this->Run("c", "def f():\n    return 1 / 0").ok);
  Result r = this->Run("c", "x = 1\nf()");
  ASSERT_TRUE(r.error.has_value());
  EXPECT_TRUE(Contains(*r.error, "File \"<cell 2>\", line 2, in <module>")) << *r.error;
  EXPECT_TRUE(Contains(*r.error, "File \"<cell 1>\", line 2, in f")) << *r.error;
  Result syntax = this->Run("c", "1 +");
  ASSERT_TRUE(syntax.error.has_value());
  EXPECT_TRUE(Contains(*syntax.error, "File \"<cell 3>\", line 1")) << *syntax.error;
}

TYPED_TEST(BackendConformance, DeepRecursionIsARecursionError) {
  Result r = this->Run("c", "def down(n):\n    return down(n + 1)\ndown(0)");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, kExitFailure);
  EXPECT_EQ(LastLine(r.error).rfind("RecursionError: maximum recursion depth exceeded", 0), 0u)
      << LastLine(r.error);
  EXPECT_LT(r.error.value_or("").size(), 10000u) << "repeated frames are folded";
  EXPECT_EQ(this->Run("c", "down.__name__").value, "'down'");
}

TYPED_TEST(BackendConformance, KeyboardInterruptRaisedByTheCellIsAnError) {
  EXPECT_TRUE(this->Run("c", "kept = 1").ok);
  Result r = this->Run("c", "raise KeyboardInterrupt");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, kExitFailure);
  EXPECT_EQ(LastLine(r.error), "KeyboardInterrupt");
  EXPECT_EQ(this->Run("c", "kept").value, "1");
}

TYPED_TEST(BackendConformance, ToolboxExceptionCarriesItsExitCode) {
  EXPECT_EQ(this->Run("c", "mytools.add(2, 3)").value, "5");
  Result r = this->Run("c", "rows = mytools.load('nope')");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(LastLine(r.error),
            "mytools.NotFound: no table 'nope'; known tables: customers, orders");
  ASSERT_TRUE(r.error.has_value());
  // The cell's frame, then the toolbox's own (it is the user's code, not the
  // engine's); nothing of dolsot in between.
  // (The checkout's own path may contain "dolsot": count the frames.)
  std::vector<std::string> frames;
  for (std::size_t at = r.error->find("  File \""); at != std::string::npos;
       at = r.error->find("  File \"", at + 1)) {
    frames.push_back(r.error->substr(at, r.error->find('\n', at) - at));
  }
  ASSERT_EQ(frames.size(), 2u) << *r.error;
  EXPECT_TRUE(Contains(frames[0], "File \"<cell")) << *r.error;
  EXPECT_TRUE(Contains(frames[1], "mytools/__init__.py")) << *r.error;
  EXPECT_FALSE(Contains(*r.error, "<frozen")) << *r.error;
  EXPECT_TRUE(r.held.empty()) << "the failed assignment bound nothing";
}

TYPED_TEST(BackendConformance, ToolboxCallWithWrongArgumentsShowsTheSignature) {
  Result r = this->Run("c", "mytools.add(1)");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, kExitFailure);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_TRUE(Contains(*r.error, "TypeError")) << *r.error;
  EXPECT_TRUE(Contains(*r.error, "add(a: int, b: int) -> int")) << *r.error;
  EXPECT_TRUE(Contains(*r.error, "mytools.help(\"add\")") ||
              Contains(*r.error, "mytools.help('add')"))
      << *r.error;
}

TYPED_TEST(BackendConformance, SystemExitIsCaughtAndTheSessionKept) {
  EXPECT_TRUE(this->Run("c", "kept = 5").ok);
  Result r = this->Run("c", "import sys\nsys.exit(4)");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(this->Run("c", "kept").value, "5");
  Result zero = this->Run("c", "sys.exit(0)");
  EXPECT_TRUE(zero.ok) << zero.error.value_or("");
  EXPECT_EQ(zero.exit_code, kExitOk);
  EXPECT_EQ(this->Run("c", "kept + 1").value, "6");
}

TYPED_TEST(BackendConformance, SystemExitWithAMessage) {
  Result r = this->Run("c", "import sys\nsys.exit('bye now')");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, kExitFailure);
  EXPECT_TRUE(Contains(r.error.value_or(""), "bye now")) << r.error.value_or("");
  Result builtin_exit = this->Run("c", "exit(3)");
  EXPECT_FALSE(builtin_exit.ok);
  EXPECT_EQ(builtin_exit.exit_code, 3);
  EXPECT_EQ(this->Run("c", "sys.__name__").value, "'sys'");
}

TYPED_TEST(BackendConformance, InputRaisesEofErrorAtOnce) {
  Result r = this->Run("c", "answer = input('name? ')");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, kExitFailure);
  EXPECT_EQ(LastLine(r.error), "EOFError: EOF when reading a line");
  EXPECT_TRUE(r.held.empty());
}

TYPED_TEST(BackendConformance, HeldListsNamesWithoutDundersOrToolboxAliases) {
  Result r = this->Run("c", "import os\ndef f(): pass\nx = 1\n__hidden__ = 2");
  EXPECT_TRUE(r.ok) << r.error.value_or("");
  EXPECT_EQ(r.held, (std::vector<std::string>{"os", "f", "x"}));
  EXPECT_TRUE(Contains(r.Text(), "session now holds: os, f, x")) << r.Text();
  EXPECT_TRUE(this->Run("fresh", "1").held.empty()) << "mytools is bound but not held";
}

TYPED_TEST(BackendConformance, TextJoinsOutputValueAndHeld) {
  Result r = this->Run("c", "print('hi')\n1 + 1");
  EXPECT_EQ(r.Text(), "hi\n2\nsession now holds: nothing");
}

TYPED_TEST(BackendConformance, OutputOverTheCapKeepsHeadAndTail) {
  constexpr std::size_t kCap = 1000;
  ASSERT_TRUE(this->Open({.max_output = kCap}));
  Result r = this->Run("c", "for i in range(100000): print(i)\n'v' * 5000");
  EXPECT_TRUE(r.ok) << r.error.value_or("");
  EXPECT_EQ(r.stdout_text.rfind("0\n1\n2\n", 0), 0u) << r.stdout_text.substr(0, 40);
  EXPECT_TRUE(r.stdout_text.ends_with("99998\n99999\n")) << r.stdout_text;
  EXPECT_TRUE(Contains(r.stdout_text, "characters cut")) << r.stdout_text;
  EXPECT_LT(r.stdout_text.size(), kCap + 300) << "the cap plus one line saying what was cut";
  ASSERT_TRUE(r.value.has_value());
  EXPECT_LE(r.value->size(), kCap);
  EXPECT_EQ(r.value->rfind("'vvvv", 0), 0u) << *r.value;
}

TYPED_TEST(BackendConformance, HugeListReprIsBounded) {
  Result r = this->Run("c", "list(range(1_000_000))");
  EXPECT_TRUE(r.ok) << r.error.value_or("");
  ASSERT_TRUE(r.value.has_value());
  EXPECT_LE(r.value->size(), kDefaultMaxOutput);
  EXPECT_EQ(r.value->rfind("[0, 1, 2, 3", 0), 0u) << r.value->substr(0, 40);
  EXPECT_TRUE(Contains(*r.value, "list of 1000000 items"))
      << r.value->substr(r.value->size() - 200);
}

TYPED_TEST(BackendConformance, TimeoutReturns124AndTheSessionAnswersNext) {
  EXPECT_TRUE(this->Run("t", "kept = 1").ok);
  Result r = this->Run("t", "print('started', flush=True)\nwhile True:\n    pass", 1.0);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, kExitTimeout);
  EXPECT_TRUE(Contains(r.stdout_text, "started")) << r.stdout_text;
  ASSERT_TRUE(r.error.has_value());
  EXPECT_TRUE(Contains(*r.error, "timeout") || Contains(*r.error, "timed out")) << *r.error;
  Result next = this->Run("t", "kept + 1");
  EXPECT_TRUE(next.ok) << next.error.value_or("");
  EXPECT_EQ(next.value, "2") << "state from before the timed-out cell is intact";
}

TYPED_TEST(BackendConformance, BackendTimeoutAppliesWithoutARunOption) {
  ASSERT_TRUE(this->Open({.timeout_seconds = 1.0}));
  // The first cell may start a worker (inside the Repl's deadline): give it room.
  EXPECT_TRUE(this->Run("t", "kept = 1", kDefaultTimeout).ok);
  Result r = this->Run("t", "while True:\n    pass");
  EXPECT_EQ(r.exit_code, kExitTimeout);
  EXPECT_EQ(this->Run("t", "kept").value, "1");
}

TYPED_TEST(BackendConformance, CallerMistakesAreStatusesBeforeAnythingRuns) {
  Backend& backend = this->backend();
  for (std::string_view bad_id : {"bad id!", "", "all", "../up", "-x"}) {
    StatusOr<Result> r = backend.Run(bad_id, "x = 1", {});
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidSession) << "id '" << bad_id << "'";
  }
  for (std::string_view empty : {"", "   ", "\n\t\r\n"}) {
    StatusOr<Result> r = backend.Run("fine", empty, {});
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidSession);
  }
  EXPECT_TRUE(SessionIds(backend).empty()) << "no session was created";
  EXPECT_EQ(backend.Reset("bad id!").status().code(), ErrorCode::kInvalidSession);
  RunOptions negative;
  negative.timeout_seconds = -1;
  EXPECT_FALSE(backend.Run("fine", "1", negative).ok());
  EXPECT_TRUE(SessionIds(backend).empty());
}

TYPED_TEST(BackendConformance, SessionsListUsedSessionsAndResetForgetsThem) {
  Backend& backend = this->backend();
  EXPECT_TRUE(this->Run("one", "a = 1").ok);
  EXPECT_TRUE(this->Run("two", "b = 2").ok);
  EXPECT_EQ(SessionIds(backend), (std::set<std::string>{"one", "two"}));
  StatusOr<int> missing = backend.Reset("missing");
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_EQ(*missing, 0);
  StatusOr<int> one = backend.Reset("one");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(*one, 1);
  EXPECT_EQ(SessionIds(backend), std::set<std::string>{"two"});
  EXPECT_EQ(this->Run("one", "'a' in globals()").value, "False");
  EXPECT_EQ(this->Run("two", "b").value, "2") << "the other session is untouched";
  StatusOr<int> all = backend.Reset("all");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, 2);
  EXPECT_TRUE(SessionIds(backend).empty());
  EXPECT_EQ(this->Run("two", "'b' in globals()").value, "False");
}

TYPED_TEST(BackendConformance, RejectingGateStopsTheCellBeforeItRuns) {
  ASSERT_TRUE(this->Open({.gate = [](const GateRequest& request) {
    GateVerdict verdict;
    if (request.code.find("forbidden") != std::string_view::npos) {
      verdict.allowed = false;
      verdict.message = "line 2: forbidden is not allowed here";
    }
    return verdict;
  }}));
  EXPECT_TRUE(this->Run("g", "kept = 1").ok);
  Result rejected = this->Run("g", "x = 1\nforbidden = print('ran')");
  EXPECT_FALSE(rejected.ok);
  EXPECT_EQ(rejected.exit_code, kExitFailure);
  EXPECT_EQ(rejected.error, "line 2: forbidden is not allowed here");
  EXPECT_EQ(rejected.stdout_text, "");
  EXPECT_EQ(rejected.value, std::nullopt);
  Result after = this->Run("g", "'x' in globals(), kept");
  EXPECT_EQ(after.value, "(False, 1)") << "the rejected cell had no effect";
  EXPECT_EQ(after.held, std::vector<std::string>{"kept"});
}

TYPED_TEST(BackendConformance, GateRejectionReportsWhatTheSessionHolds) {
  ASSERT_TRUE(this->Open({.gate = [](const GateRequest& request) {
    return GateVerdict{request.code.find("forbidden") == std::string_view::npos, "no"};
  }}));
  EXPECT_TRUE(this->Run("g", "kept = 1").ok);
  Result rejected = this->Run("g", "forbidden = 2");
  EXPECT_FALSE(rejected.ok);
  EXPECT_EQ(rejected.held, std::vector<std::string>{"kept"})
      << "Result::held is what the session now holds; Text() shows it to the agent";
}

TYPED_TEST(BackendConformance, GateRejectionWithoutAMessageStillSaysWhy) {
  ASSERT_TRUE(this->Open({.gate = [](const GateRequest&) { return GateVerdict{false, ""}; }}));
  Result rejected = this->Run("g", "1");
  EXPECT_FALSE(rejected.ok);
  EXPECT_EQ(rejected.exit_code, kExitFailure);
  ASSERT_TRUE(rejected.error.has_value());
  EXPECT_FALSE(rejected.error->empty()) << "an agent gets no reason at all";
}

TYPED_TEST(BackendConformance, UnpicklableObjectsStayUsableAcrossCells) {
  // Whether such names are listed in Result::dropped differs by design
  // (the Repl cannot checkpoint them; in-process nothing is pickled), so only
  // their use across cells is common to both.
  EXPECT_TRUE(this->Run("c", "import threading\nlock = threading.Lock()\n"
                             "g = (i for i in range(3))").ok);
  EXPECT_EQ(this->Run("c", "lock.acquire(), next(g), next(g)").value, "(True, 0, 1)");
}

TYPED_TEST(BackendConformance, ParallelSessionsNeverCrossOutput) {
  constexpr int kSessions = 4;
  constexpr int kLines = 100;
  std::vector<Result> results(kSessions);
  std::vector<std::thread> threads;
  for (int t = 0; t < kSessions; ++t) {
    threads.emplace_back([this, t, &results] {
      std::string tag = "S" + std::to_string(t);
      std::string code = "import time\nfor i in range(" + std::to_string(kLines) +
                         "):\n    print('" + tag + "', i)\n    time.sleep(0)\n'" + tag + "'";
      results[t] = this->Run("p" + std::to_string(t), code);
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kSessions; ++t) {
    std::string tag = "S" + std::to_string(t);
    std::string expected;
    for (int i = 0; i < kLines; ++i) expected += tag + " " + std::to_string(i) + "\n";
    EXPECT_EQ(results[t].stdout_text, expected);
    EXPECT_EQ(results[t].value, "'" + tag + "'");
  }
}

TYPED_TEST(BackendConformance, CallsOnOneSessionRunOneAtATime) {
  // Each cell reads n, yields the GIL, then writes n + 1: two cells of one
  // session interleaving would lose an increment.
  EXPECT_TRUE(this->Run("same", "import time\nn = 0").ok);
  constexpr int kThreads = 2;
  constexpr int kCells = 10;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this] {
      for (int i = 0; i < kCells; ++i) {
        EXPECT_TRUE(this->Run("same", "v = n\ntime.sleep(0.002)\nn = v + 1").ok);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(this->Run("same", "n").value, std::to_string(kThreads * kCells));
}

TYPED_TEST(BackendConformance, CloseIsIdempotentAndLaterCallsAreErrors) {
  Backend& backend = this->backend();
  EXPECT_TRUE(this->Run("c", "x = 1").ok);
  EXPECT_TRUE(backend.Close().ok());
  EXPECT_TRUE(backend.Close().ok());
  StatusOr<Result> after = backend.Run("c", "x", {});
  EXPECT_EQ(after.status().code(), ErrorCode::kUnavailable);
}

// ---------------------------------------------------------------- outcomes

TYPED_TEST(BackendConformance, OutcomeSaysWhatHappenedToTheCell) {
  EXPECT_EQ(this->Run("o", "x = 1").outcome(), Outcome::kOk);
  EXPECT_EQ(this->Run("o", "1 / 0").outcome(), Outcome::kError);
  EXPECT_EQ(this->Run("o", "mytools.find('nothing')").outcome(), Outcome::kError)
      << "a toolbox's own exit code is still an error";
  EXPECT_EQ(this->Run("o", "def f(:\n  pass").outcome(), Outcome::kError);
  EXPECT_EQ(this->Run("o", "raise SystemExit(3)").outcome(), Outcome::kError);
  Result timed_out = this->Run("o", "while True:\n    pass", 0.5);
  EXPECT_EQ(timed_out.outcome(), Outcome::kTimeout);
  EXPECT_EQ(timed_out.exit_code, kExitTimeout);
}

// ------------------------------------------------------------ the pipeline

TYPED_TEST(BackendConformance, GatesRunInOneOrderAndTheFirstRejectionWins) {
  auto order = std::make_shared<std::vector<std::string>>();
  auto seen_held = std::make_shared<std::vector<std::string>>();
  BackendSpec spec;
  spec.ast_gate = [order](const GateRequest& request) {
    order->push_back("ast");
    return GateVerdict{request.code.find("ast_denied") == std::string_view::npos, "by ast"};
  };
  spec.gate = [order, seen_held](const GateRequest& request) {
    order->push_back("caller");
    *seen_held = request.held;
    EXPECT_GT(request.deadline, std::chrono::steady_clock::now()) << "the cell's deadline";
    return GateVerdict{request.code.find("denied") == std::string_view::npos, "by caller"};
  };
  ASSERT_TRUE(this->Open(spec));
  EXPECT_TRUE(this->Run("p", "kept = 1").ok);
  EXPECT_EQ(*order, (std::vector<std::string>{"ast", "caller"}));
  EXPECT_EQ(*seen_held, std::vector<std::string>{}) << "a new session holds nothing yet";
  order->clear();
  Result by_ast = this->Run("p", "ast_denied = 1");
  EXPECT_EQ(by_ast.outcome(), Outcome::kRejected);
  EXPECT_EQ(by_ast.error, "by ast");
  EXPECT_EQ(*order, std::vector<std::string>{"ast"}) << "no gate runs after a rejection";
  order->clear();
  Result by_caller = this->Run("p", "denied = 1");
  EXPECT_EQ(by_caller.outcome(), Outcome::kRejected);
  EXPECT_EQ(by_caller.exit_code, kExitFailure);
  EXPECT_EQ(by_caller.error, "by caller");
  EXPECT_EQ(by_caller.held, std::vector<std::string>{"kept"});
  EXPECT_EQ(*seen_held, std::vector<std::string>{"kept"}) << "gates see the session's names";
  EXPECT_EQ(*order, (std::vector<std::string>{"ast", "caller"}));
}

// ---------------------------------------------------------- interruption

// A named pipe a cell writes one byte into once it is running, so the test
// acts on a cell that has surely started (it blocks in Wait until then).
class StartSignal {
 public:
  StartSignal() {
    char dir[] = "/tmp/dolsot-conformance-XXXXXX";
    EXPECT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/started";
    EXPECT_EQ(::mkfifo(path_.c_str(), 0600), 0);
  }
  ~StartSignal() {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  // Python that signals the start.
  std::string Code() const {
    return "import os\n_fd = os.open('" + path_ + "', os.O_WRONLY)\nos.write(_fd, b'!')\n"
           "os.close(_fd)\ndel _fd\n";
  }
  // Blocks until the cell has signalled.
  void Wait() const {
    int fd = ::open(path_.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    char byte = 0;
    EXPECT_EQ(::read(fd, &byte, 1), 1);
    ::close(fd);
  }

 private:
  std::string dir_;
  std::string path_;
};

TYPED_TEST(BackendConformance, InterruptStopsTheRunningCellAndKeepsTheSession) {
  EXPECT_TRUE(this->Run("i", "kept = 1").ok);
  StartSignal started;
  Result interrupted;
  std::thread runner([&] {
    interrupted = this->Run("i", "kept = 2\nprint('before', flush=True)\n" + started.Code() +
                                     "while True:\n    pass");
  });
  started.Wait();
  EXPECT_TRUE(this->backend().Interrupt("i").ok());
  runner.join();
  EXPECT_FALSE(interrupted.ok);
  EXPECT_EQ(interrupted.outcome(), Outcome::kInterrupted);
  EXPECT_EQ(interrupted.exit_code, kExitInterrupted);
  EXPECT_TRUE(Contains(interrupted.stdout_text, "before")) << interrupted.stdout_text;
  Result next = this->Run("i", "kept");
  EXPECT_TRUE(next.ok) << next.error.value_or("");
  // The Repl rolls back to before the cell; in-process the cell's own
  // assignment stands (the interrupt is cooperative): both keep the session.
  const std::string expected = this->backend().capabilities().crash_survival ? "1" : "2";
  EXPECT_EQ(next.value, expected);
}

TYPED_TEST(BackendConformance, InterruptWithNoCellRunningDoesNothing) {
  EXPECT_TRUE(this->backend().Interrupt("idle").ok());
  EXPECT_TRUE(this->Run("idle", "x = 1").ok);
  EXPECT_TRUE(this->backend().Interrupt("idle").ok());
  EXPECT_EQ(this->Run("idle", "x").value, "1") << "a stale interrupt stops no later cell";
  EXPECT_EQ(this->backend().Interrupt("bad id!").code(), ErrorCode::kInvalidSession);
}

TYPED_TEST(BackendConformance, StopCheckStopsTheCellLikeInterrupt) {
  StartSignal started;
  std::atomic<bool> stop{false};
  std::thread signaller([&] {
    started.Wait();
    stop = true;
  });
  RunOptions options;
  options.should_stop = [&stop] { return stop.load(); };
  StatusOr<Result> r =
      this->backend().Run("s", started.Code() + "while True:\n    pass", options);
  signaller.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outcome(), Outcome::kInterrupted);
  EXPECT_EQ(r->exit_code, kExitInterrupted);
  EXPECT_TRUE(this->Run("s", "1").ok);
}

// ------------------------------------------------ capabilities and options

TYPED_TEST(BackendConformance, OptionalOperationsFollowTheCapabilities) {
  Backend& backend = this->backend();
  const Capabilities& caps = backend.capabilities();
  EXPECT_TRUE(this->Run("src", "x = 41").ok);
  Status branched = backend.Branch("src", "copy");
  if (caps.branch) {
    EXPECT_TRUE(branched.ok()) << branched.ToString();
    EXPECT_EQ(this->Run("copy", "x + 1").value, "42");
    Status from_nothing = backend.Branch("never-used", "copy2");
    EXPECT_EQ(from_nothing.code(), ErrorCode::kInvalidSession) << from_nothing.ToString();
    EXPECT_EQ(SessionIds(backend).count("copy2"), 0u) << "no empty session is made";
  } else {
    EXPECT_EQ(branched.code(), ErrorCode::kUnimplemented) << branched.ToString();
  }
  py::gil_scoped_acquire gil;
  StatusOr<PyObject*> ns = backend.Namespace("src");
  if (caps.live_objects) {
    ASSERT_TRUE(ns.ok()) << ns.status().ToString();
    py::dict dict = py::reinterpret_steal<py::dict>(*ns);
    EXPECT_EQ(dict["x"].cast<int>(), 41);
  } else {
    EXPECT_EQ(ns.status().code(), ErrorCode::kUnimplemented);
  }
}

// Release, LiveSessions and SandboxStatus are Backend's too (the server and
// `dolsot --sandbox --check` reach a Repl through nothing else): a durable
// backend lets a live session go to its store and takes it back on the next
// Run; any other answers kUnimplemented and holds nothing it could let go.
TYPED_TEST(BackendConformance, ReleaseAndLiveSessionsFollowTheCapabilities) {
  Backend& backend = this->backend();
  const Capabilities& caps = backend.capabilities();
  EXPECT_TRUE(this->Run("kept", "x = 41").ok);
  const std::vector<std::string> live = backend.LiveSessions();
  Status released = backend.Release("kept");
  if (caps.durable) {
    EXPECT_EQ(live, std::vector<std::string>{"kept"});
    EXPECT_TRUE(released.ok()) << released.ToString();
    EXPECT_TRUE(backend.LiveSessions().empty());
    EXPECT_EQ(this->Run("kept", "x + 1").value, "42") << "restored from the store";
    EXPECT_TRUE(backend.Release("never-used").ok()) << "not live here: nothing to do";
  } else {
    EXPECT_TRUE(live.empty());
    EXPECT_EQ(released.code(), ErrorCode::kUnimplemented) << released.ToString();
  }
  StatusOr<SandboxReport> report = backend.SandboxStatus();
  // Sandboxed backends are tested in tests/sandbox; none of these is.
  ASSERT_FALSE(caps.sandbox);
  EXPECT_FALSE(report.ok());
  if (!caps.durable) EXPECT_EQ(report.status().code(), ErrorCode::kUnimplemented);
}

TYPED_TEST(BackendConformance, HardTimeoutStopsACellStuckInC) {
  if (!this->backend().capabilities().hard_timeout) {
    GTEST_SKIP() << "this backend promises only a cooperative timeout";
  }
  EXPECT_TRUE(this->Run("h", "import time\nkept = 1").ok);
  Result r = this->Run("h", "time.sleep(60)", 0.5);
  EXPECT_EQ(r.outcome(), Outcome::kTimeout);
  EXPECT_EQ(this->Run("h", "kept").value, "1");
}

TYPED_TEST(BackendConformance, CrashingCellCostsNeitherHostNorSession) {
  if (!this->backend().capabilities().crash_survival) {
    GTEST_SKIP() << "a crash in this backend takes the host down, by design";
  }
  EXPECT_TRUE(this->Run("c", "kept = 1").ok);
  Result r = this->Run("c", "import os\nos._exit(7)");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.outcome(), Outcome::kCrashed);
  EXPECT_EQ(r.exit_code, kExitFailure);
  EXPECT_EQ(this->Run("c", "kept").value, "1");
}

// ---------------------------------------------------------------------------
// Live output (RunOptions::live, issue #40): what a cell writes reaches the
// callback while the cell runs, on a thread of dolsot's, in order, all of it
// before Run returns, bounded as the Result.

// The text on_output saw (thread-safe), and the threads it was called on.
struct LiveText {
  std::mutex mutex;
  std::string text;
  std::set<std::thread::id> threads;

  void Add(std::string_view chunk) {
    std::lock_guard<std::mutex> lock(mutex);
    text.append(chunk);
    threads.insert(std::this_thread::get_id());
  }
  std::string Get() {
    std::lock_guard<std::mutex> lock(mutex);
    return text;
  }
};

TYPED_TEST(BackendConformance, LiveOutputArrivesWhileTheCellRuns) {
  // The cell loops for ever once it printed; only the callback ends it, once
  // it saw the first chunk. So that chunk came while the cell ran.
  LiveText seen;
  std::atomic<bool> interrupted{false};
  Backend& backend = this->backend();
  RunOptions options;
  options.timeout_seconds = 30;
  options.live.on_output = [&](std::string_view chunk) {
    seen.Add(chunk);
    if (Contains(seen.Get(), "first") && !interrupted.exchange(true)) {
      EXPECT_TRUE(backend.Interrupt("live").ok());
    }
  };
  StatusOr<Result> r = backend.Run("live", "print('first', flush=True)\nwhile True:\n    pass",
                                   options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(interrupted.load());
  EXPECT_EQ(r->outcome(), Outcome::kInterrupted);
  // "first" at least: the "\n" print writes next may come after Run returned
  // (in-process, an interrupted cell's thread runs on briefly), and then is
  // never delivered.
  EXPECT_EQ(seen.Get().rfind("first", 0), 0u) << seen.Get();
  EXPECT_EQ(seen.threads.count(std::this_thread::get_id()), 0u);
}

TYPED_TEST(BackendConformance, LiveOutputIsTheResultsOutputInOrder) {
  LiveText seen;
  RunOptions options;
  options.live.on_output = [&](std::string_view chunk) { seen.Add(chunk); };
  StatusOr<Result> r = this->backend().Run(
      "c", "import sys\nfor i in range(50):\n    print(i)\n    sys.stderr.write('e\\n')\n1",
      options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string expected;
  for (int i = 0; i < 50; ++i) expected += std::to_string(i) + "\ne\n";
  EXPECT_EQ(r->stdout_text, expected);
  EXPECT_EQ(seen.Get(), expected) << "every chunk, in order, before Run returned";
}

TYPED_TEST(BackendConformance, LiveOutputOfATimedOutCellIsDelivered) {
  LiveText seen;
  RunOptions options;
  options.timeout_seconds = 0.5;
  options.live.on_output = [&](std::string_view chunk) { seen.Add(chunk); };
  StatusOr<Result> r = this->backend().Run(
      "t", "print('started', flush=True)\nwhile True:\n    pass", options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outcome(), Outcome::kTimeout);
  EXPECT_EQ(seen.Get(), "started\n");
}

TYPED_TEST(BackendConformance, LiveOutputIsBoundedByMaxOutput) {
  BackendSpec spec;
  spec.max_output = 40;
  ASSERT_TRUE(this->Open(spec));
  LiveText seen;
  RunOptions options;
  options.live.on_output = [&](std::string_view chunk) { seen.Add(chunk); };
  StatusOr<Result> r =
      this->backend().Run("c", "for i in range(100):\n    print('abcdefghi')", options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string text = seen.Get();
  EXPECT_EQ(text.substr(0, 40), "abcdefghi\nabcdefghi\nabcdefghi\nabcdefghi\n");
  EXPECT_TRUE(Contains(text.substr(40), "output past 40 characters is not streamed")) << text;
  EXPECT_FALSE(Contains(text.substr(40), "abcdefghi")) << text;
  EXPECT_TRUE(Contains(r->stdout_text, "characters cut")) << "the Result keeps head and tail";
}

}  // namespace conformance
}  // namespace dolsot
