// The interpreter's owner (embedded/interpreter.h) in a process that starts
// no CPython itself: leases share one interpreter, the last one finalizes it,
// a host's own interpreter is only borrowed. Every test ends with no
// interpreter running, so the tests also pass run in one process.
#include "embedded/interpreter.h"

#include <Python.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace dolsot {
namespace {

std::shared_ptr<InterpreterLease> MustAcquire() {
  StatusOr<std::shared_ptr<InterpreterLease>> lease = AcquireInterpreter();
  EXPECT_TRUE(lease.ok()) << lease.status().ToString();
  return lease.ok() ? *lease : nullptr;
}

// Runs `code` in __main__ on this thread (taking the GIL); true when it raised nothing.
bool RunPython(const std::string& code) {
  PyGILState_STATE gil = PyGILState_Ensure();
  const bool ok = PyRun_SimpleString(code.c_str()) == 0;
  PyGILState_Release(gil);
  return ok;
}

TEST(Interpreter, LeasesShareOneInterpreterAndTheLastFinalizesIt) {
  ASSERT_FALSE(Py_IsInitialized());
  std::shared_ptr<InterpreterLease> first = MustAcquire();
  EXPECT_TRUE(Py_IsInitialized());
  EXPECT_TRUE(first->started_by_dolsot());
  std::shared_ptr<InterpreterLease> second = MustAcquire();
  EXPECT_TRUE(second->started_by_dolsot());
  EXPECT_EQ(CurrentInterpreterStatus().leases, 2);
  ASSERT_TRUE(RunPython("import builtins\nbuiltins.dolsot_marker = 1"));

  first.reset();
  EXPECT_TRUE(Py_IsInitialized()) << "a lease still holds it";
  EXPECT_TRUE(RunPython("assert dolsot_marker == 1"));
  second.reset();
  EXPECT_FALSE(Py_IsInitialized());
  InterpreterStatus status = CurrentInterpreterStatus();
  EXPECT_FALSE(status.running);
  EXPECT_FALSE(status.started_by_dolsot);
  EXPECT_EQ(status.leases, 0);

  std::shared_ptr<InterpreterLease> again = MustAcquire();
  EXPECT_TRUE(RunPython("import builtins\nassert not hasattr(builtins, 'dolsot_marker')"))
      << "a fresh interpreter";
  again.reset();
  EXPECT_FALSE(Py_IsInitialized());
}

TEST(Interpreter, StartedWithTheGilFreeForAnyThread) {
  std::shared_ptr<InterpreterLease> lease = MustAcquire();
  bool ran = false;
  std::thread other([&] { ran = RunPython("x = 6 * 7"); });  // would block on a held GIL
  other.join();
  EXPECT_TRUE(ran);
  EXPECT_TRUE(RunPython("assert x == 42")) << "and the acquiring thread too";
  lease.reset();
  EXPECT_FALSE(Py_IsInitialized());
}

TEST(Interpreter, AHostsOwnInterpreterIsBorrowedAndNeverFinalized) {
  Py_InitializeEx(0);  // the host's; this thread holds the GIL
  std::shared_ptr<InterpreterLease> lease = MustAcquire();
  EXPECT_FALSE(lease->started_by_dolsot());
  EXPECT_EQ(CurrentInterpreterStatus().leases, 0);
  lease.reset();
  EXPECT_TRUE(Py_IsInitialized());
  EXPECT_EQ(PyRun_SimpleString("y = 1"), 0);
  ASSERT_EQ(Py_FinalizeEx(), 0);
}

TEST(Interpreter, TheLastLeaseReleasedUnderTheGilLeavesItRunning) {
  std::shared_ptr<InterpreterLease> lease = MustAcquire();
  PyGILState_STATE gil = PyGILState_Ensure();
  lease.reset();  // finalizing now would free this thread's own state
  EXPECT_TRUE(Py_IsInitialized());
  EXPECT_EQ(PyRun_SimpleString("z = 1"), 0);
  PyGILState_Release(gil);
  EXPECT_TRUE(CurrentInterpreterStatus().started_by_dolsot);

  std::shared_ptr<InterpreterLease> next = MustAcquire();  // the same interpreter
  EXPECT_TRUE(RunPython("assert z == 1"));
  next.reset();  // without the GIL: finalizes
  EXPECT_FALSE(Py_IsInitialized());
}

TEST(Interpreter, ByDefaultItsMainThreadIsDolsotsOwn) {
  std::shared_ptr<InterpreterLease> lease = MustAcquire();
  EXPECT_TRUE(RunPython("import threading\n"
                        "assert threading.current_thread() is not threading.main_thread()"));
  // The finalization runs there: it does not wait for this thread to end.
  lease.reset();
  EXPECT_FALSE(Py_IsInitialized());
}

TEST(Interpreter, OnTheCallingThreadItIsFinalizedOnlyThere) {
  InterpreterOptions options;
  options.main_thread = PythonMainThread::kCallingThread;
  StatusOr<std::shared_ptr<InterpreterLease>> lease = AcquireInterpreter(options);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_TRUE(RunPython("import threading\n"
                        "assert threading.current_thread() is threading.main_thread()\n"
                        "import signal\n"
                        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler"));
  std::thread([&] { lease->reset(); }).join();
  EXPECT_TRUE(Py_IsInitialized()) << "released elsewhere: left running";
  EXPECT_EQ(CurrentInterpreterStatus().leases, 0);

  std::shared_ptr<InterpreterLease> again = MustAcquire();  // the same interpreter
  EXPECT_TRUE(RunPython("assert threading.current_thread() is threading.main_thread()"));
  again.reset();  // on its main thread: finalized
  EXPECT_FALSE(Py_IsInitialized());
}

// Set by a Py_AtExit callback: it runs during the finalization.
std::atomic<int> acquire_during_finalization{-1};

void AcquireWhileFinalizing() {
  StatusOr<std::shared_ptr<InterpreterLease>> lease = AcquireInterpreter();
  acquire_during_finalization = static_cast<int>(lease.status().code());
}

TEST(Interpreter, AcquiringFromCodeTheFinalizationRunsIsRefusedNotADeadlock) {
  std::shared_ptr<InterpreterLease> lease = MustAcquire();
  ASSERT_EQ(Py_AtExit(&AcquireWhileFinalizing), 0);
  lease.reset();
  EXPECT_EQ(acquire_during_finalization.load(), static_cast<int>(ErrorCode::kUnavailable));
  EXPECT_FALSE(Py_IsInitialized());
}

// Threads that lease, run Python and release at random overlaps: the
// interpreter is started and finalized many times, never under a holder.
TEST(Interpreter, ManyThreadsLeasingAtOnce) {
  constexpr int kThreads = 6, kRounds = 15;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        StatusOr<std::shared_ptr<InterpreterLease>> lease = AcquireInterpreter();
        if (!lease.ok() || !(*lease)->started_by_dolsot()) {
          ++failures;
          continue;
        }
        const std::string code = "import json\nassert json.loads('[" + std::to_string(t) +
                                 "]') == [" + std::to_string(t) + "]";
        if (!RunPython(code)) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_FALSE(Py_IsInitialized());
  EXPECT_EQ(CurrentInterpreterStatus().leases, 0);
}

}  // namespace
}  // namespace dolsot
