// InProcessSession inside one embedded CPython: live objects by reference,
// parallel sessions, the cooperative timeout, leaked threads, the gate.
#include "backend_inprocess/in_process_session.h"

#include <gtest/gtest.h>
#include <pybind11/embed.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace py = pybind11;

namespace dolsot {
namespace {

std::unique_ptr<InProcessSession> MakeSession(InProcessOptions options = {}) {
  auto created = InProcessSession::Create(std::move(options));
  EXPECT_TRUE(created.ok()) << created.status().ToString();
  return created.ok() ? std::move(*created) : nullptr;
}

Result MustRun(InProcessSession& session, std::string_view id, std::string_view code,
               std::optional<double> timeout = std::nullopt) {
  RunOptions options;
  options.timeout_seconds = timeout;
  StatusOr<Result> result = session.Run(id, code, options);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? *result : Result{};
}

TEST(InProcessSession, KeepsStatePerSession) {
  auto session = MakeSession();
  EXPECT_TRUE(MustRun(*session, "a", "x = 40").ok);
  EXPECT_EQ(*MustRun(*session, "a", "x + 2").value, "42");
  Result other = MustRun(*session, "b", "x");
  EXPECT_FALSE(other.ok);
  EXPECT_NE(other.error->find("NameError"), std::string::npos);
  EXPECT_TRUE(other.dropped.empty());
}

TEST(InProcessSession, InjectedObjectIsTheVeryObject) {
  InProcessOptions options;
  py::object table;
  {
    py::gil_scoped_acquire gil;
    table = py::dict();
    options.objects.emplace_back("table", table.ptr());
    options.toolboxes.emplace_back("m", "math");
  }
  auto session = MakeSession(std::move(options));
  Result r = MustRun(*session, "s", "table['k'] = m.sqrt(16)\nlen(table)");
  EXPECT_EQ(*r.value, "1");
  EXPECT_TRUE(r.held.empty()) << "injected aliases are not listed in held";
  py::gil_scoped_acquire gil;
  EXPECT_EQ(table["k"].cast<double>(), 4.0);
  StatusOr<PyObject*> ns = session->Namespace("s");
  ASSERT_TRUE(ns.ok());
  auto globals = py::reinterpret_steal<py::dict>(*ns);
  EXPECT_TRUE(py::object(globals["table"]).is(table));
  table = py::object();
}

TEST(InProcessSession, NamespaceIsLive) {
  auto session = MakeSession();
  {
    py::gil_scoped_acquire gil;
    auto globals = py::reinterpret_steal<py::dict>(*session->Namespace("n"));
    globals["from_host"] = 7;
  }
  EXPECT_EQ(*MustRun(*session, "n", "from_host * 6").value, "42");
}

TEST(InProcessSession, CallerMayHoldTheGil) {
  auto session = MakeSession();
  py::gil_scoped_acquire gil;
  EXPECT_EQ(*MustRun(*session, "g", "2 ** 10").value, "1024");
}

TEST(InProcessSession, CallerMistakesAreStatuses) {
  auto session = MakeSession();
  EXPECT_EQ(session->Run("bad id", "1", {}).status().code(), ErrorCode::kInvalidSession);
  EXPECT_EQ(session->Run("ok", "  \n", {}).status().code(), ErrorCode::kInvalidSession);
  RunOptions negative;
  negative.timeout_seconds = -1;
  EXPECT_FALSE(session->Run("ok", "1", negative).ok());
  InProcessOptions bad;
  bad.toolboxes.emplace_back("nope", "dolsot_no_such_module_xyz");
  EXPECT_EQ(InProcessSession::Create(std::move(bad)).status().code(), ErrorCode::kInvalidToolbox);
  InProcessOptions bad_alias;
  bad_alias.toolboxes.emplace_back("not an alias", "math");
  EXPECT_EQ(InProcessSession::Create(std::move(bad_alias)).status().code(),
            ErrorCode::kInvalidToolbox);
}

TEST(InProcessSession, ParallelSessionsNeverCrossOutput) {
  auto session = MakeSession();
  constexpr int kThreads = 8;
  std::vector<Result> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::string code = "import time\nfor i in range(200):\n    print('S" + std::to_string(t) +
                         "', i)\n    time.sleep(0)\n'done'";
      results[t] = MustRun(*session, "p" + std::to_string(t), code);
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    std::string expected;
    for (int i = 0; i < 200; ++i) expected += "S" + std::to_string(t) + " " + std::to_string(i) + "\n";
    EXPECT_EQ(results[t].stdout_text, expected);
    EXPECT_EQ(*results[t].value, "'done'");
  }
}

TEST(InProcessSession, PythonLoopIsStoppedAtTheDeadline) {
  auto session = MakeSession();
  MustRun(*session, "t", "kept = 1");
  Result r = MustRun(*session, "t", "print('started', flush=True)\nwhile True:\n    pass", 0.3);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, kExitTimeout);
  EXPECT_EQ(r.stdout_text, "started\n");
  EXPECT_NE(r.error->find("timeout"), std::string::npos);
  EXPECT_EQ(r.held, std::vector<std::string>{"kept"});
  // The asynchronous KeyboardInterrupt stops the loop; the session goes on.
  Result next = MustRun(*session, "t", "kept + 1");
  EXPECT_EQ(*next.value, "2");
  EXPECT_EQ(session->LeakedThreads(), 0);
}

TEST(InProcessSession, CellStuckInCCodeIsLeakedAndItsSessionBusyUntilReset) {
  auto session = MakeSession();
  Result r = MustRun(*session, "stuck", "import time\ntime.sleep(3600)", 0.3);
  EXPECT_EQ(r.exit_code, kExitTimeout);
  EXPECT_EQ(session->LeakedThreads(), 1);
  StatusOr<Result> refused = session->Run("stuck", "1", {});
  EXPECT_EQ(refused.status().code(), ErrorCode::kBusy);
  EXPECT_EQ(*MustRun(*session, "other", "3").value, "3") << "other sessions are not blocked";
  EXPECT_EQ(*session->Reset("stuck"), 1);
  Result fresh = MustRun(*session, "stuck", "'time' in globals()");
  EXPECT_EQ(*fresh.value, "False");
}

TEST(InProcessSession, GateRejectsBeforeAnythingRuns) {
  InProcessOptions options;
  options.gate = [](const GateRequest& request) {
    GateVerdict verdict;
    if (request.code.find("forbidden") != std::string_view::npos) {
      verdict.allowed = false;
      verdict.message = "line 1: forbidden";
    }
    return verdict;
  };
  auto session = MakeSession(std::move(options));
  Result rejected = MustRun(*session, "g", "x = 1\nforbidden = 2");
  EXPECT_FALSE(rejected.ok);
  EXPECT_EQ(rejected.exit_code, 1);
  EXPECT_EQ(*rejected.error, "line 1: forbidden");
  EXPECT_FALSE(MustRun(*session, "g", "x").ok) << "the rejected cell did not run";
  EXPECT_TRUE(MustRun(*session, "g", "x = 1").ok);
}

TEST(InProcessSession, SessionsResetAndClose) {
  auto session = MakeSession();
  MustRun(*session, "one", "1");
  MustRun(*session, "two", "2");
  auto sessions = session->Sessions();
  ASSERT_TRUE(sessions.ok());
  ASSERT_EQ(sessions->size(), 2u);
  EXPECT_EQ((*sessions)[0].id, "one");
  EXPECT_GT((*sessions)[0].last_used, 0.0);
  EXPECT_EQ(*session->Reset("missing"), 0);
  EXPECT_EQ(*session->Reset("all"), 2);
  EXPECT_TRUE(session->Sessions()->empty());
  EXPECT_FALSE(session->Reset("bad id").ok());
  EXPECT_TRUE(session->Close().ok());
  EXPECT_TRUE(session->Close().ok());
  EXPECT_EQ(session->Run("one", "1", {}).status().code(), ErrorCode::kUnavailable);
}

TEST(InProcessSession, OutputIsCappedByMaxOutput) {
  InProcessOptions options;
  options.config.max_output = 100;
  auto session = MakeSession(std::move(options));
  Result r = MustRun(*session, "o", "for i in range(100000): print(i)");
  EXPECT_LT(r.stdout_text.size(), 500u);
  EXPECT_NE(r.stdout_text.find("characters cut"), std::string::npos);
}

// The hand-offs (host -> cell thread -> host) spin before they sleep; no cell
// may be lost, run twice or answered to the wrong caller, whatever the timing.
TEST(InProcessSession, BackToBackCellsOnManyThreadsAndSessionsAllArrive) {
  auto session = MakeSession();
  constexpr int kThreads = 6, kSessionsPerThread = 3, kCells = 150;
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int s = 0; s < kSessionsPerThread; ++s) {
        MustRun(*session, "h" + std::to_string(t) + "s" + std::to_string(s), "n = 0");
      }
      for (int c = 1; c <= kCells; ++c) {
        for (int s = 0; s < kSessionsPerThread; ++s) {
          const std::string id = "h" + std::to_string(t) + "s" + std::to_string(s);
          Result r = MustRun(*session, id, "n += 1\n(" + std::to_string(t * 100 + s) + ", n)");
          if (!r.value || *r.value != "(" + std::to_string(t * 100 + s) + ", " +
                                          std::to_string(c) + ")") {
            ++wrong[t];
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  EXPECT_EQ(session->LeakedThreads(), 0);
}

TEST(InProcessSession, AfterManyQuickCellsATimeoutStillReturns124AndCountsOneLeak) {
  auto session = MakeSession();
  for (int i = 0; i < 500; ++i) MustRun(*session, "q", "1 + 1");  // spin budgets learned
  Result r = MustRun(*session, "q", "import time\nprint('before', flush=True)\ntime.sleep(3600)",
                     0.3);
  EXPECT_EQ(r.exit_code, kExitTimeout);
  EXPECT_EQ(r.stdout_text, "before\n");
  EXPECT_EQ(session->LeakedThreads(), 1);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(*MustRun(*session, "other", "2 + 2").value, "4");
  EXPECT_EQ(session->LeakedThreads(), 1);
  EXPECT_EQ(session->Run("q", "1", {}).status().code(), ErrorCode::kBusy);
}

}  // namespace
}  // namespace dolsot
