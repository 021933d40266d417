// Rollback: a cell that times out or dies (a Python loop, a sleep, C code, a
// segfault, os._exit, SIGKILL) leaves the session exactly as before that cell,
// and the Result says what happened, with the output printed before the kill.
// (The kernel's OOM killer sends SIGKILL: the KilledFromOutside case.)
#include <gtest/gtest.h>

#include "backend_subprocess/repl.h"
#include "core/memory_store.h"
#include "tests/backend_subprocess/repl_test_support.h"

namespace dolsot {
namespace {

using repl_testing::MustRun;

std::unique_ptr<Repl> MakeRepl(bool snapshots, CheckpointMode mode = CheckpointMode::kSync,
                               std::shared_ptr<SessionStore> store = nullptr) {
  return repl_testing::MakeTestRepl(snapshots, mode, std::move(store));
}

struct Runaway {
  const char* name;
  const char* code;
};

class Timeouts : public ::testing::TestWithParam<Runaway> {};

TEST_P(Timeouts, ReturnTimeoutWithPartialOutputAndKeepEarlierState) {
  auto repl = MakeRepl(true);
  MustRun(*repl, "s", "state = [1, 2, 3]");
  Result r = MustRun(*repl, "s", std::string("print('before', flush=True)\nstate.append(4)\n") +
                                     GetParam().code,
                     1.0);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, kExitTimeout);
  EXPECT_EQ(r.stdout_text, "before\n");
  ASSERT_TRUE(r.error.has_value());
  EXPECT_NE(r.error->find("timeout"), std::string::npos) << *r.error;
  EXPECT_EQ(r.held, std::vector<std::string>{"state"});
  EXPECT_EQ(MustRun(*repl, "s", "state").value, "[1, 2, 3]");
  // And the session keeps working, including another timeout.
  EXPECT_EQ(MustRun(*repl, "s", "while True: pass", 0.5).exit_code, kExitTimeout);
  EXPECT_EQ(MustRun(*repl, "s", "len(state)").value, "3");
}

INSTANTIATE_TEST_SUITE_P(
    Runaways, Timeouts,
    ::testing::Values(Runaway{"PythonLoop", "while True: pass"},
                      Runaway{"Sleep", "import time\ntime.sleep(60)"},
                      Runaway{"CCode", "import re\nre.match(r'(a|aa)*c', 'a' * 60)"}),
    [](const auto& info) { return std::string(info.param.name); });

struct Crash {
  const char* name;
  const char* code;
  const char* reason;
};

class Crashes : public ::testing::TestWithParam<Crash> {};

TEST_P(Crashes, LeaveTheSessionAsBeforeTheCell) {
  auto repl = MakeRepl(true);
  MustRun(*repl, "s", "import os\nkept = {'a': 1}");
  Result r = MustRun(*repl, "s", std::string("kept['a'] = 2\nprint('partial', flush=True)\n") +
                                     GetParam().code);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, kExitFailure);
  EXPECT_EQ(r.stdout_text, "partial\n");
  ASSERT_TRUE(r.error.has_value());
  EXPECT_NE(r.error->find(GetParam().reason), std::string::npos) << *r.error;
  EXPECT_NE(r.error->find("rolled back"), std::string::npos) << *r.error;
  EXPECT_EQ(MustRun(*repl, "s", "kept").value, "{'a': 1}");
}

INSTANTIATE_TEST_SUITE_P(
    Deaths, Crashes,
    ::testing::Values(
        Crash{"Segfault", "import ctypes\nctypes.string_at(0)", "SIGSEGV"},
        Crash{"OsExit", "os._exit(3)", "exited with status 3"},
        Crash{"KilledFromOutside", "import signal\nos.kill(os.getpid(), signal.SIGKILL)",
              "SIGKILL"}),
    [](const auto& info) { return std::string(info.param.name); });

// A timeout's Result does not wait for the snapshot to take over; a crash in
// the cell after reports its own death (how the promoted runner ended).
TEST(TimeoutThenCrash, TheCrashReportsItsOwnDeath) {
  auto repl = MakeRepl(true);
  MustRun(*repl, "s", "import os\nkept = 1");
  EXPECT_EQ(MustRun(*repl, "s", "while True: pass", 0.5).exit_code, kExitTimeout);
  Result r = MustRun(*repl, "s", "os._exit(7)");
  EXPECT_EQ(r.exit_code, kExitFailure);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_NE(r.error->find("exited with status 7"), std::string::npos) << *r.error;
  EXPECT_EQ(MustRun(*repl, "s", "kept").value, "1");
}

// A process a cell forks without exec lives on while later cells run. It must
// not keep the sockets the session prepared for its next replies: holding the
// next runner's socket, it would hide that runner's death from the host,
// which would then wait for the deadline (exit code 124) instead.
TEST(ForkedChildren, DoNotHideALaterRunnersDeath) {
  auto repl = MakeRepl(true, CheckpointMode::kAsync);
  MustRun(*repl, "s",
          "import os, time\n"
          "child = os.fork()\n"
          "if child == 0:\n"
          "    time.sleep(600)\n"
          "    os._exit(0)\n");
  Result r = MustRun(*repl, "s", "os._exit(3)", 20.0);
  EXPECT_EQ(r.exit_code, kExitFailure);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_NE(r.error->find("exited with status 3"), std::string::npos) << *r.error;
  MustRun(*repl, "s", "import signal\nos.kill(child, signal.SIGKILL)");
}

TEST(RollbackOff, KilledCellGoesBackToTheLastCheckpoint) {
  auto repl = MakeRepl(false, CheckpointMode::kSync);
  MustRun(*repl, "s", "x = 1");
  MustRun(*repl, "s", "x = 2\nunsaved = object()");
  Result r = MustRun(*repl, "s", "x = 3\nwhile True: pass", 0.5);
  EXPECT_EQ(r.exit_code, kExitTimeout);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_NE(r.error->find("last checkpoint"), std::string::npos);
  EXPECT_EQ(MustRun(*repl, "s", "x").value, "2");
}

TEST(RollbackOff, WithoutCheckpointsAKilledSessionStartsEmpty) {
  auto repl = MakeRepl(false, CheckpointMode::kOff);
  MustRun(*repl, "s", "x = 1");
  EXPECT_EQ(MustRun(*repl, "s", "import os\nos._exit(0)").exit_code, kExitFailure);
  EXPECT_EQ(MustRun(*repl, "s", "'x' in globals()").value, "False");
}

// The CLI's case: rollback off, one cell in a session just restored. The
// checkpoint it goes back to is its state before the cell, so the Result says
// the session still holds the restored names.
TEST(RollbackOff, AKilledFirstCellAfterARestoreKeepsWhatWasRestored) {
  auto store = std::make_shared<MemoryStore>();
  MustRun(*MakeRepl(false, CheckpointMode::kSync, store), "s", "kept = 1");
  for (const char* code : {"kept = 2\nwhile True: pass", "kept = 2\nimport os\nos._exit(3)"}) {
    auto repl = MakeRepl(false, CheckpointMode::kSync, store);
    Result r = MustRun(*repl, "s", code, 0.5);
    EXPECT_NE(r.exit_code, 0) << code;
    EXPECT_EQ(r.held, std::vector<std::string>{"kept"}) << code;
    ASSERT_TRUE(r.error.has_value());
    EXPECT_NE(r.error->find("state before this cell"), std::string::npos) << *r.error;
    EXPECT_EQ(MustRun(*repl, "s", "kept").value, "1");
    // Not the first cell any more: a kill goes back to the last checkpoint.
    r = MustRun(*repl, "s", "while True: pass", 0.5);
    EXPECT_EQ(r.exit_code, kExitTimeout);
    EXPECT_NE(r.error.value_or("").find("last checkpoint"), std::string::npos);
  }
}

TEST(RollbackOff, AKilledFirstCellOfANewSessionHoldsNothing) {
  auto repl = MakeRepl(false);
  Result r = MustRun(*repl, "s", "x = 1\nwhile True: pass", 0.5);
  EXPECT_EQ(r.exit_code, kExitTimeout);
  EXPECT_TRUE(r.held.empty());
  EXPECT_EQ(MustRun(*repl, "s", "'x' in globals()").value, "False");
}

TEST(Rollback, StdinIsEmptyAndSystemExitKeepsTheSession) {
  auto repl = MakeRepl(true);
  MustRun(*repl, "s", "y = 5");
  Result r = MustRun(*repl, "s", "input()");
  EXPECT_NE(r.error.value_or("").find("EOFError"), std::string::npos);
  MustRun(*repl, "s", "raise SystemExit(4)");
  EXPECT_EQ(MustRun(*repl, "s", "y").value, "5");
}

}  // namespace
}  // namespace dolsot
