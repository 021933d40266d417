// InProcessSession in a C++ host that never started CPython: Create starts
// the interpreter, the last Close finalizes it, and a later session starts it
// again. (Its own binary: no embedded interpreter around it; ctest runs each
// test in a process of its own.)
#include <Python.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "backend_inprocess/in_process_session.h"
#include "embedded/interpreter.h"
#include "sandbox/ast_gate.h"

namespace dolsot {
namespace {

std::unique_ptr<InProcessSession> MustCreate() {
  auto session = InProcessSession::Create({});
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  return session.ok() ? std::move(session).value() : nullptr;
}

Result MustRun(InProcessSession& session, std::string_view id, std::string_view code,
               double timeout = 30) {
  RunOptions options;
  options.timeout_seconds = timeout;
  StatusOr<Result> result = session.Run(id, code, options);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? std::move(result).value() : Result{};
}

TEST(OwnedInterpreter, StartedByCreateAndFinalizedByClose) {
  for (int round = 0; round < 2; ++round) {
    ASSERT_FALSE(Py_IsInitialized());
    InProcessOptions options;
    options.toolboxes.emplace_back("m", "math");
    auto session = InProcessSession::Create(std::move(options));
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    EXPECT_TRUE(Py_IsInitialized());
    StatusOr<Result> r = (*session)->Run("s", "print('hi')\nm.factorial(5)", {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stdout_text, "hi\n");
    EXPECT_EQ(*r->value, "120");
    RunOptions quick;
    quick.timeout_seconds = 0.2;
    StatusOr<Result> late = (*session)->Run("s", "while True:\n    pass", quick);
    EXPECT_EQ(late->exit_code, kExitTimeout);
    EXPECT_TRUE((*session)->Close().ok());
    EXPECT_FALSE(Py_IsInitialized());
  }
}

// Closing one of two sessions used to finalize the interpreter under the
// other (the first session owned it), and the other's next cell crashed.
TEST(OwnedInterpreter, SessionsShareItAndTheLastCloseFinalizesIt) {
  ASSERT_FALSE(Py_IsInitialized());
  std::unique_ptr<InProcessSession> a = MustCreate();
  std::unique_ptr<InProcessSession> b = MustCreate();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*MustRun(*a, "s", "x = 'a'\nx").value, "'a'");
  EXPECT_EQ(*MustRun(*b, "s", "import builtins\nbuiltins.dolsot_marker = 1\ny = 'b'\ny").value,
            "'b'");

  EXPECT_TRUE(a->Close().ok());
  EXPECT_TRUE(Py_IsInitialized()) << "b still holds it";
  Result after = MustRun(*b, "s", "y + 'b'");
  EXPECT_TRUE(after.ok) << after.error.value_or("");
  EXPECT_EQ(*after.value, "'bb'");
  EXPECT_TRUE(b->Close().ok());
  EXPECT_FALSE(Py_IsInitialized()) << "the last close finalizes";

  std::unique_ptr<InProcessSession> c = MustCreate();  // starts a fresh interpreter
  ASSERT_TRUE(c);
  EXPECT_EQ(*MustRun(*c, "s", "import builtins\nhasattr(builtins, 'dolsot_marker')").value,
            "False");
  EXPECT_TRUE(c->Close().ok());
  EXPECT_FALSE(Py_IsInitialized());
}

// The AST gate's runtime half is per interpreter (its types, its caches) on
// top of type's slots wrapped once per process: a fresh interpreter after a
// finalization holds it again, and its ungated sessions stay free.
TEST(OwnedInterpreter, TheRuntimeGateHoldsInEachFreshInterpreter) {
  ASSERT_FALSE(Py_IsInitialized());
  for (int round = 0; round < 2; ++round) {
    InProcessOptions options;
    options.config.typecheck = false;
    options.ast_gate = MakeAstGate();
    auto gated = InProcessSession::Create(std::move(options));
    ASSERT_TRUE(gated.ok()) << gated.status().ToString();
    Result refused = MustRun(**gated, "s", "import json\nD = json.JSONDecoder\nD.decode = None");
    EXPECT_FALSE(refused.ok) << "round " << round;
    EXPECT_NE(refused.error.value_or("").find("line 3, col 1: [module-assignment]"),
              std::string::npos)
        << refused.error.value_or("");
    Result table = MustRun(**gated, "s", "import html.entities as e\nt = e.html5\nt.clear()");
    EXPECT_NE(table.error.value_or("").find("[module-assignment]"), std::string::npos);
    EXPECT_EQ(*MustRun(**gated, "s", "class C:\n    n = 1\nC.n += 1\n(C.n, len(t) > 2000)").value,
              "(2, True)");
    std::unique_ptr<InProcessSession> plain = MustCreate();
    EXPECT_EQ(*MustRun(*plain, "s", "import json\nclass K(json.JSONDecoder):\n    pass\n"
                                    "json.JSONDecoder.dolsot_mark = 1\nK.dolsot_mark")
                   .value,
              "1");
    EXPECT_TRUE((*gated)->Close().ok());
    EXPECT_TRUE(plain->Close().ok());
    EXPECT_FALSE(Py_IsInitialized()) << "round " << round;
  }
}

// Set by a Py_AtExit callback: it runs at the end of the finalization.
std::mutex finalized_mutex;
std::condition_variable finalized_changed;
bool finalized = false;

void NoteFinalized() {
  std::lock_guard<std::mutex> lock(finalized_mutex);
  finalized = true;
  finalized_changed.notify_all();
}

// Close used to finalize while a late cell's thread still ran; that thread
// then crashed or hung when its C call returned into the interpreter.
TEST(OwnedInterpreter, CloseLeavesAStuckCellItsInterpreterUntilItEnds) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  std::unique_ptr<InProcessSession> session = MustCreate();
  ASSERT_TRUE(session);
  {
    std::lock_guard<std::mutex> lock(finalized_mutex);
    finalized = false;
  }
  {
    PyGILState_STATE gil = PyGILState_Ensure();
    ASSERT_EQ(Py_AtExit(&NoteFinalized), 0);
    PyGILState_Release(gil);
  }
  // Blocked in read(2), which no asynchronous exception interrupts.
  Result stuck = MustRun(*session, "s",
                         "import os\nos.read(" + std::to_string(pipe_fds[0]) + ", 1)", 0.3);
  EXPECT_EQ(stuck.exit_code, kExitTimeout);
  EXPECT_EQ(session->LeakedThreads(), 1);

  EXPECT_TRUE(session->Close().ok());  // returns although the cell never ends
  EXPECT_TRUE(Py_IsInitialized()) << "the stuck cell's thread holds a lease";
  EXPECT_EQ(CurrentInterpreterStatus().leases, 1);
  {
    std::lock_guard<std::mutex> lock(finalized_mutex);
    EXPECT_FALSE(finalized);
  }

  ASSERT_EQ(::write(pipe_fds[1], "x", 1), 1);  // the cell ends; its thread finalizes
  {
    std::unique_lock<std::mutex> lock(finalized_mutex);
    finalized_changed.wait(lock, [] { return finalized; });
  }
  EXPECT_EQ(session->LeakedThreads(), 0);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);

  std::unique_ptr<InProcessSession> next = MustCreate();  // after that finalization
  ASSERT_TRUE(next);
  EXPECT_EQ(*MustRun(*next, "s", "6 * 7").value, "42");
  EXPECT_TRUE(next->Close().ok());
  EXPECT_FALSE(Py_IsInitialized());
}

void ExitThree() { ::_exit(3); }  // a Py_AtExit callback: a finalization ran

// The process may exit while a stuck cell still holds the interpreter: it
// exits normally, without finalizing (the Py_AtExit callback never runs).
TEST(OwnedInterpreter, AProcessExitsWithAStuckCellWithoutFinalizing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        int pipe_fds[2];
        if (::pipe(pipe_fds) != 0) ::_exit(2);
        std::unique_ptr<InProcessSession> session = MustCreate();
        PyGILState_STATE gil = PyGILState_Ensure();
        Py_AtExit(&ExitThree);
        PyGILState_Release(gil);
        MustRun(*session, "s", "import os\nos.read(" + std::to_string(pipe_fds[0]) + ", 1)", 0.3);
        (void)session->Close();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace dolsot
