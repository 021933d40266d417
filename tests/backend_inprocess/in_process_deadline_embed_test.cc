// InProcessSession's deadline for a C++ host when the cell holds the GIL in
// C code: run() returns 124 at the deadline anyway, and so do the calls that
// need no Python (another session's run, reset, leak counts); once the C
// code lets go, the session recovers and nothing is left counted.
#include "backend_inprocess/in_process_session.h"

#include <Python.h>
#include <gtest/gtest.h>
#include <pybind11/embed.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

namespace py = pybind11;

namespace dolsot {
namespace {

std::atomic<bool> spinning{false};
std::atomic<bool> let_go{false};

// A C function that holds the GIL until the test lets it go, as a
// catastrophic regex or a huge power does.
PyObject* HoldGil(PyObject*, PyObject*) {
  spinning.store(true);
  while (!let_go.load()) {
  }
  spinning.store(false);
  Py_RETURN_NONE;
}
PyMethodDef kHoldGil = {"hold_gil", HoldGil, METH_NOARGS, "holds the GIL until let go"};

Result MustRun(InProcessSession& session, std::string_view id, std::string_view code,
               std::optional<double> timeout = std::nullopt) {
  RunOptions options;
  options.timeout_seconds = timeout;
  StatusOr<Result> result = session.Run(id, code, options);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? *result : Result{};
}

TEST(InProcessDeadline, RunReturnsAtTheDeadlineWhileCCodeHoldsTheGil) {
  std::unique_ptr<InProcessSession> session;
  {
    py::gil_scoped_acquire gil;
    PyObject* hold = PyCFunction_New(&kHoldGil, nullptr);
    ASSERT_NE(hold, nullptr);
    InProcessOptions options;
    options.objects = {{"hold_gil", hold}};
    options.config.timeout_seconds = 0.5;  // what a reset waits for, at most
    auto created = InProcessSession::Create(std::move(options));
    Py_DECREF(hold);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    session = std::move(*created);
  }
  EXPECT_TRUE(MustRun(*session, "idle", "kept = [1, 2, 3]").ok);
  EXPECT_TRUE(MustRun(*session, "a", "x = 1").ok);

  Result stuck = MustRun(*session, "a", "print('before', flush=True)\nhold_gil()", 1.0);
  ASSERT_TRUE(spinning.load()) << "the cell reached the C function before its deadline";
  EXPECT_EQ(stuck.exit_code, kExitTimeout);
  EXPECT_EQ(stuck.stdout_text, "before\n");
  EXPECT_EQ(stuck.held, std::vector<std::string>{"x"});
  // Still held: what needs no Python answers at once.
  EXPECT_EQ(session->LeakedThreads(), 1);
  EXPECT_EQ(session->LeakedCells(), (std::map<std::string, int>{{"a", 1}}));
  EXPECT_EQ(session->Run("a", "1", {}).status().code(), ErrorCode::kBusy);
  Result other = MustRun(*session, "b", "1 + 1", 0.2);
  EXPECT_EQ(other.exit_code, kExitTimeout) << "another session's cell waits for the GIL";
  // A reset drops its namespace on a worker, under the timeout: it returns.
  EXPECT_EQ(*session->Reset("idle"), 1);
  EXPECT_EQ(session->LeakedCells().count("idle"), 1u) << "its release is late, and counted";
  ASSERT_TRUE(spinning.load()) << "everything above ran while the GIL was held";

  let_go.store(true);
  // The stopper's KeyboardInterrupt ends the cell once the C call returns.
  StatusOr<Result> next = session->Run("a", "x + 1", {});
  for (int attempt = 0; attempt < 20 && !next.ok() && next.status().code() == ErrorCode::kBusy;
       ++attempt) {
    next = session->Run("a", "x + 1", {});  // each waits up to 0.5 s for the late cell
  }
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(*next->value, "2");
  EXPECT_EQ(*MustRun(*session, "b", "1 + 1").value, "2");
  // The late release ends once it has the GIL (a poll, not a sleep: the
  // order in which the waiting threads get the GIL is the OS's).
  for (int spin = 0; spin < 2000000 && session->LeakedThreads() != 0; ++spin) {
    std::this_thread::yield();
  }
  EXPECT_EQ(session->LeakedThreads(), 0);
  EXPECT_TRUE(session->LeakedCells().empty());
  EXPECT_TRUE(session->Close().ok());
}

}  // namespace
}  // namespace dolsot
