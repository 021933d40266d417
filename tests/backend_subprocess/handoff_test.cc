// The runner/snapshot hand-off with rollback on: after each cell the runner
// forks a snapshot of its new state and retires the previous snapshot itself
// (post-cell work deferred until the host has the Result). State stays right
// over many cells; a timeout or a crash between hand-offs still rolls back;
// retired snapshots do not pile up; async checkpoints still land.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "backend_subprocess/repl.h"
#include "core/memory_store.h"
#include "tests/backend_subprocess/repl_test_support.h"

namespace dolsot {
namespace {

using repl_testing::MustRun;

std::unique_ptr<Repl> MakeRepl(CheckpointMode mode, std::shared_ptr<SessionStore> store = nullptr) {
  return repl_testing::MakeTestRepl(/*snapshots=*/true, mode, std::move(store));
}

// Live (not zombie) processes descending from `root`.
std::set<pid_t> LiveDescendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  std::set<pid_t> zombies;
  for (const repl_testing::ProcEntry& p : repl_testing::ReadProcTable()) {
    children.emplace(p.ppid, p.pid);
    if (p.state == 'Z' || p.state == 'X') zombies.insert(p.pid);
  }
  std::set<pid_t> out;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    auto [lo, hi] = children.equal_range(p);
    for (auto it = lo; it != hi; ++it) {
      if (out.insert(it->second).second) todo.push_back(it->second);
    }
  }
  for (pid_t z : zombies) out.erase(z);
  return out;
}

TEST(HandOff, StateIsRightOverManyCells) {
  for (CheckpointMode mode : {CheckpointMode::kOff, CheckpointMode::kAsync}) {
    auto repl = MakeRepl(mode);
    MustRun(*repl, "s", "x = 0\nlog = []");
    for (int i = 1; i <= 150; ++i) {
      Result r = MustRun(*repl, "s", "x += 1\nlog.append(x)\nx");
      ASSERT_TRUE(r.ok) << r.error.value_or("");
      ASSERT_EQ(r.value, std::to_string(i));
    }
    EXPECT_EQ(MustRun(*repl, "s", "log == list(range(1, 151))").value, "True");
    ASSERT_TRUE(repl->Close().ok());
  }
}

TEST(HandOff, RollbackAfterTimeoutAndCrashBetweenHandOffs) {
  auto repl = MakeRepl(CheckpointMode::kAsync);
  MustRun(*repl, "s", "x = 0");
  for (int round = 0; round < 5; ++round) {
    MustRun(*repl, "s", "x += 1");
    Result timed_out = MustRun(*repl, "s", "x = -1\nwhile True: pass", 0.3);
    EXPECT_EQ(timed_out.exit_code, kExitTimeout);
    EXPECT_EQ(MustRun(*repl, "s", "x").value, std::to_string(2 * round + 1));
    MustRun(*repl, "s", "x += 1");
    Result crashed = MustRun(*repl, "s", "import os\nx = -2\nos._exit(3)");
    EXPECT_FALSE(crashed.ok);
    EXPECT_NE(crashed.error.value_or("").find("rolled back"), std::string::npos);
    EXPECT_EQ(MustRun(*repl, "s", "x").value, std::to_string(2 * round + 2));
  }
}

TEST(HandOff, RetiredSnapshotsDoNotPileUp) {
  auto repl = MakeRepl(CheckpointMode::kOff);
  MustRun(*repl, "a", "x = 1");
  MustRun(*repl, "b", "y = 1");
  for (int i = 0; i < 60; ++i) {
    MustRun(*repl, "a", "x += 1");
    MustRun(*repl, "b", "y += 1");
  }
  // Per session: its keeper (session_keeper.h), the runner, its snapshot,
  // and the snapshots retired by the last hand-offs still on their way out:
  // one, or two when the machine is loaded (post-cell work runs under
  // SCHED_BATCH); and the session the worker keeps forked ahead (two).
  // Without the hand-off retiring the previous snapshot there would be one
  // process per cell, over 60 per session here.
  std::set<pid_t> live = LiveDescendants(repl->WorkerPid());
  EXPECT_LE(live.size(), 12u);
  ASSERT_TRUE(repl->Close().ok());
}

TEST(HandOff, RetiredSnapshotsAreReapedAsTheyExit) {
  // Retired snapshots are reaped by their runner at its next hand-off, and
  // whatever is reparented to the worker (a child subreaper) as it exits;
  // once reaped only between host frames or once a second, back-to-back
  // cells left hundreds of zombies (#21).
  auto repl = MakeRepl(CheckpointMode::kOff);
  for (const char* sid : {"a", "b", "c"}) MustRun(*repl, sid, "x = 1");
  for (int i = 0; i < 100; ++i) {
    for (const char* sid : {"a", "b", "c"}) MustRun(*repl, sid, "x += 1");
  }
  const pid_t worker = repl->WorkerPid();
  std::set<pid_t> parents = LiveDescendants(worker);
  parents.insert(worker);
  int zombies = 0;
  for (const repl_testing::ProcEntry& p : repl_testing::ReadProcTable()) {
    if (parents.count(p.ppid) != 0 && p.state == 'Z') ++zombies;
  }
  // At most the few that exited in the last instants (the worker's) and the
  // snapshot each runner retired last (reaped at its next hand-off).
  EXPECT_LE(zombies, 3 + 3) << "zombies among the session's processes";
  ASSERT_TRUE(repl->Close().ok());
}

TEST(HandOff, KillingEveryProcessFromOutsideStillLeavesAUsableSession) {
  auto repl = MakeRepl(CheckpointMode::kSync);
  MustRun(*repl, "s", "x = 41");
  MustRun(*repl, "s", "x += 1");
  // Kill every process of the session (as an OOM killer might). A snapshot
  // the runner forked just after the kill list was taken survives and takes
  // over (a roll back to the state after the last cell); otherwise the
  // session comes back from its checkpoint. Each loss is reported, and the
  // state is the last cell's either way.
  for (pid_t p : LiveDescendants(repl->WorkerPid())) ::kill(p, SIGKILL);
  int losses = 0;
  Result r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    r = MustRun(*repl, "s", "x");
    if (r.ok) break;
    ++losses;
    const std::string error = r.error.value_or("");
    EXPECT_TRUE(error.find("last checkpoint") != std::string::npos ||
                error.find("rolled back") != std::string::npos)
        << error;
  }
  EXPECT_TRUE(r.ok) << r.error.value_or("");
  EXPECT_EQ(r.value, "42");
  EXPECT_LE(losses, 2);
}

TEST(HandOff, AsyncCheckpointsLandAndTheLastOneWinsAfterClose) {
  auto store = std::make_shared<MemoryStore>();
  {
    auto repl = MakeRepl(CheckpointMode::kAsync, store);
    MustRun(*repl, "s", "big = bytearray(8 << 20)\nn = 0");
    for (int i = 0; i < 30; ++i) MustRun(*repl, "s", "n += 1");
    ASSERT_TRUE(repl->Close().ok());  // flushes the pending checkpoints
  }
  auto repl = MakeRepl(CheckpointMode::kAsync, store);
  EXPECT_EQ(MustRun(*repl, "s", "n, len(big)").value, "(30, 8388608)");
}

}  // namespace
}  // namespace dolsot
