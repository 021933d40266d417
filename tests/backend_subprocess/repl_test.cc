// Repl end to end through the dolsot-worker executable: state between cells,
// results, toolboxes, checkpoints to the store, restore, branch, reset.
#include "backend_subprocess/repl.h"

#include <thread>
#include <fstream>
#include <filesystem>
#include <unistd.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "backend_subprocess/protocol.h"
#include "core/memory_store.h"
#include "tests/backend_subprocess/repl_test_support.h"

extern char** environ;

namespace dolsot {
namespace {

using repl_testing::MustRun;

std::unique_ptr<Repl> MakeRepl(std::shared_ptr<SessionStore> store,
                               CheckpointMode mode = CheckpointMode::kSync,
                               bool snapshots = true) {
  return repl_testing::MakeTestRepl(snapshots, mode, std::move(store));
}

class ReplModes : public ::testing::TestWithParam<std::tuple<bool, CheckpointMode>> {};

TEST_P(ReplModes, StateValueAndOutputAcrossCells) {
  auto [snapshots, mode] = GetParam();
  auto repl = MakeRepl(std::make_shared<MemoryStore>(), mode, snapshots);
  Result a = MustRun(*repl, "s1", "x = 20\nprint('hi')\nx + 1");
  EXPECT_TRUE(a.ok) << a.error.value_or("");
  EXPECT_EQ(a.value, "21");
  EXPECT_EQ(a.stdout_text, "hi\n");
  Result b = MustRun(*repl, "s1", "x * 2");
  EXPECT_EQ(b.value, "40");
  EXPECT_EQ(b.held, std::vector<std::string>{"x"});
  Result c = MustRun(*repl, "s1", "1/0");
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.exit_code, 1);
  ASSERT_TRUE(c.error.has_value());
  EXPECT_NE(c.error->find("ZeroDivisionError"), std::string::npos);
  EXPECT_EQ(MustRun(*repl, "s1", "x").value, "20");
  EXPECT_TRUE(repl->Close().ok());
}

INSTANTIATE_TEST_SUITE_P(
    All, ReplModes,
    ::testing::Combine(::testing::Bool(),
                       ::testing::Values(CheckpointMode::kSync, CheckpointMode::kAsync,
                                         CheckpointMode::kOff)));

TEST(Repl, CallerMistakesAreStatusesBeforeAnythingRuns) {
  auto repl = MakeRepl(std::make_shared<MemoryStore>());
  EXPECT_EQ(repl->Run("bad id!", "1", {}).status().code(), ErrorCode::kInvalidSession);
  EXPECT_EQ(repl->Run("ok", "   \n", {}).status().code(), ErrorCode::kInvalidSession);
  EXPECT_EQ(repl->WorkerPid(), -1);  // nothing was started
  ReplOptions bad;
  bad.toolboxes["not an alias"] = "os";
  EXPECT_EQ(Repl::Create(bad).status().code(), ErrorCode::kInvalidToolbox);
}

TEST(Repl, ToolboxIsImportedOnceAndBoundUnderItsAlias) {
  ReplOptions options;
  options.store = std::make_shared<MemoryStore>();
  options.toolboxes["jp"] = "json";
  options.config.typecheck = false;
  auto repl = std::move(Repl::Create(options)).value();
  Result r = MustRun(*repl, "t", "jp.dumps([1])");
  EXPECT_EQ(r.value, "'[1]'");
  EXPECT_TRUE(r.held.empty());  // toolbox aliases are not listed as held
}

TEST(Repl, MissingToolboxIsInvalidToolbox) {
  ReplOptions options;
  options.store = std::make_shared<MemoryStore>();
  options.toolboxes["nope"] = "dolsot_no_such_module_xyz";
  options.config.typecheck = false;
  auto repl = std::move(Repl::Create(options)).value();
  auto r = repl->Run("t", "1", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidToolbox);
  EXPECT_NE(r.status().message().find("dolsot_no_such_module_xyz"), std::string::npos);
}

TEST(Repl, StartWorkerImportsTheToolboxesBeforeAnyRun) {
  // What `dolsot mcp --toolbox` relies on: the import error at start, not
  // at the first cell.
  ReplOptions missing;
  missing.store = std::make_shared<MemoryStore>();
  missing.toolboxes["nope"] = "dolsot_no_such_module_xyz";
  missing.config.typecheck = false;
  auto bad = std::move(Repl::Create(missing)).value();
  Status failed = bad->StartWorker();
  EXPECT_EQ(failed.code(), ErrorCode::kInvalidToolbox);
  EXPECT_NE(failed.message().find("dolsot_no_such_module_xyz"), std::string::npos) << failed.message();

  ReplOptions good;
  good.store = std::make_shared<MemoryStore>();
  good.toolboxes["jp"] = "json";
  good.config.typecheck = false;
  auto repl = std::move(Repl::Create(good)).value();
  EXPECT_EQ(repl->WorkerPid(), -1);  // lazily, until asked
  ASSERT_TRUE(repl->StartWorker().ok());
  const int pid = repl->WorkerPid();
  EXPECT_GT(pid, 0);
  ASSERT_TRUE(repl->StartWorker().ok());  // already running: the same worker
  EXPECT_EQ(repl->WorkerPid(), pid);
  EXPECT_EQ(MustRun(*repl, "t", "jp.dumps([1])").value, "'[1]'");
  EXPECT_EQ(repl->WorkerPid(), pid);  // the cell ran on it
  EXPECT_TRUE(repl->Close().ok());
}

TEST(Repl, NewReplRestoresSessionFromStore) {
  auto store = std::make_shared<MemoryStore>();
  for (CheckpointMode mode : {CheckpointMode::kSync, CheckpointMode::kAsync}) {
    {
      auto repl = MakeRepl(store, mode);
      MustRun(*repl, "keep", "def f(n):\n    return n * 3\nitems = [1, 2]");
      ASSERT_TRUE(repl->Close().ok());  // flushes an async checkpoint
    }
    auto repl = MakeRepl(store, mode);
    Result r = MustRun(*repl, "keep", "f(len(items))");
    EXPECT_TRUE(r.ok) << r.error.value_or("");
    EXPECT_EQ(r.value, "6");
    ASSERT_EQ(repl->Reset("keep").value(), 1);
  }
}

TEST(Repl, AnEmptyStoredCheckpointIsReportedAsDamageNotRestoredSilently) {
  // A zero-byte session file (a disk that filled, a file truncated to zero)
  // is damage: the session starts empty and the Result says why.
  auto store = std::make_shared<MemoryStore>();
  ASSERT_TRUE(store->Save("empty", "").ok());
  auto repl = MakeRepl(store, CheckpointMode::kSync);
  Result r = MustRun(*repl, "empty", "x = 1");
  EXPECT_TRUE(r.ok);
  ASSERT_TRUE(r.error.has_value()) << "nothing said the stored session was damaged";
  EXPECT_NE(r.error->find("could not be restored"), std::string::npos) << *r.error;
  EXPECT_NE(r.error->find("0 bytes"), std::string::npos) << *r.error;
  EXPECT_EQ(MustRun(*repl, "empty", "x").value, "1");
}

// A store whose every save fails (a full disk, a store that went away).
class FailingStore final : public SessionStore {
 public:
  StatusOr<std::optional<std::string>> Load(std::string_view) override {
    return std::optional<std::string>();
  }
  Status Save(std::string_view, std::string_view) override { return IoError("disk full"); }
  StatusOr<int> Delete(std::string_view) override { return 0; }
  StatusOr<std::vector<SessionInfo>> List() override { return std::vector<SessionInfo>{}; }
};

// Its first save fails, as on a disk that was full for a moment.
class FailingOnceStore final : public SessionStore {
 public:
  StatusOr<std::optional<std::string>> Load(std::string_view sid) override {
    return store_.Load(sid);
  }
  Status Save(std::string_view sid, std::string_view blob) override {
    if (!failed_.exchange(true)) return IoError("disk full");
    return store_.Save(sid, blob);
  }
  StatusOr<int> Delete(std::string_view sid) override { return store_.Delete(sid); }
  StatusOr<std::vector<SessionInfo>> List() override { return store_.List(); }

 private:
  MemoryStore store_;
  std::atomic<bool> failed_{false};
};

TEST(Repl, CloseReportsAsyncCheckpointsItCouldNotSave) {
  // The cell's own Result cannot know (its checkpoint is written after it);
  // a Close that returned normally used to hide the loss for good.
  auto repl = MakeRepl(std::make_shared<FailingStore>(), CheckpointMode::kAsync);
  EXPECT_TRUE(MustRun(*repl, "lost", "y = 1").ok);
  Status closed = repl->Close();
  EXPECT_EQ(closed.code(), ErrorCode::kIo) << closed.ToString();
  EXPECT_NE(closed.message().find("lost: disk full"), std::string::npos) << closed.message();
  EXPECT_TRUE(repl->Close().ok()) << "reported once; close stays idempotent";
}

TEST(Repl, ASyncCheckpointThatFailsIsInTheResult) {
  auto repl = MakeRepl(std::make_shared<FailingStore>(), CheckpointMode::kSync);
  Result r = MustRun(*repl, "s", "y = 1");
  ASSERT_TRUE(r.error.has_value());
  EXPECT_NE(r.error->find("checkpoint not saved: disk full"), std::string::npos) << *r.error;
  EXPECT_EQ(r.save_error, "disk full");
  // Close tries that state once more before the session goes; the store
  // still fails, so the state is lost, and Close says so.
  Status closed = repl->Close();
  EXPECT_EQ(closed.code(), ErrorCode::kIo) << closed.ToString();
  EXPECT_NE(closed.message().find("s: disk full"), std::string::npos) << closed.message();
}

TEST(Repl, CloseSavesALastStateWhoseSaveFailed) {
  // The store fails once (the cell's own save), then works: Close's second
  // try makes the state durable, and Close returns normally.
  auto store = std::make_shared<FailingOnceStore>();
  auto repl = MakeRepl(store, CheckpointMode::kSync);
  Result r = MustRun(*repl, "s", "y = 41");
  EXPECT_EQ(r.save_error, "disk full");
  EXPECT_EQ(MustRun(*repl, "s", "y + 1").value, "42");  // read-only: no checkpoint
  ASSERT_TRUE(repl->Close().ok());
  auto again = MakeRepl(store, CheckpointMode::kSync);
  EXPECT_EQ(MustRun(*again, "s", "y").value, "41");
}

TEST(Repl, UnserializableNamesAreDroppedButStayUsable) {
  auto repl = MakeRepl(std::make_shared<MemoryStore>(), CheckpointMode::kSync);
  Result r = MustRun(*repl, "d",
                     "import socket, threading\n"
                     "s = socket.socket()\nlock = threading.Lock()\n"
                     "g = (i for i in range(3))\nkeep = 1");
  std::vector<std::string> dropped = r.dropped;
  std::sort(dropped.begin(), dropped.end());
  EXPECT_EQ(dropped, (std::vector<std::string>{"g", "lock", "s"}));
  Result next = MustRun(*repl, "d", "s.fileno() >= 0, lock.acquire(), next(g)");
  EXPECT_EQ(next.value, "(True, True, 0)");
}

TEST(Repl, BranchCopiesStateAndDiverges) {
  auto store = std::make_shared<MemoryStore>();
  auto repl = MakeRepl(store);
  MustRun(*repl, "root", "n = 1");
  ASSERT_TRUE(repl->Branch("root", "twig").ok());
  MustRun(*repl, "twig", "n += 10");
  EXPECT_EQ(MustRun(*repl, "root", "n").value, "1");
  EXPECT_EQ(MustRun(*repl, "twig", "n").value, "11");
  EXPECT_EQ(repl->Branch("root", "twig").code(), ErrorCode::kInvalidSession);
  EXPECT_TRUE(store->Load("twig").value().has_value());  // the branch is durable
}

TEST(Repl, ResetForgetsLiveAndStoredSessions) {
  auto store = std::make_shared<MemoryStore>();
  auto repl = MakeRepl(store);
  MustRun(*repl, "a", "v = 1");
  MustRun(*repl, "b", "v = 2");
  EXPECT_EQ(repl->Sessions().value().size(), 2u);
  EXPECT_EQ(repl->Reset("a").value(), 1);
  Result r = MustRun(*repl, "a", "'v' in globals()");
  EXPECT_EQ(r.value, "False");
  EXPECT_EQ(repl->Reset("all").value(), 2);
  EXPECT_TRUE(store->List().value().empty());
}

TEST(Repl, LeastRecentlyUsedSessionIsEvictedAndRestored) {
  ReplOptions options;
  options.store = std::make_shared<MemoryStore>();
  options.max_live_sessions = 2;
  options.checkpoint = CheckpointMode::kOff;  // eviction checkpoints anyway
  options.config.typecheck = false;
  auto repl = std::move(Repl::Create(options)).value();
  MustRun(*repl, "one", "a = 1");
  MustRun(*repl, "two", "a = 2");
  EXPECT_EQ(repl->Evictions(), 0u);
  MustRun(*repl, "three", "a = 3");  // evicts "one"
  EXPECT_EQ(repl->Evictions(), 1u);
  Result again = MustRun(*repl, "one", "a");  // evicts "two"
  EXPECT_EQ(again.value, "1") << again.error.value_or("");
  EXPECT_EQ(MustRun(*repl, "two", "a").value, "2");  // evicts "three"
  EXPECT_EQ(repl->Evictions(), 3u);
}

// The limit changed while the Repl runs (dolsot.ray.SessionPool grows an
// actor's with the sessions it is given): a raised one keeps more live, a
// lowered one evicts when a session next becomes live; below 1 is refused.
TEST(Repl, TheLiveSessionLimitChangesWhileTheReplRuns) {
  ReplOptions options;
  options.store = std::make_shared<MemoryStore>();
  options.max_live_sessions = 1;
  options.config.typecheck = false;
  auto repl = std::move(Repl::Create(options)).value();
  EXPECT_EQ(repl->MaxLiveSessions(), 1);
  EXPECT_EQ(repl->SetMaxLiveSessions(0).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(repl->SetMaxLiveSessions(-3).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(repl->MaxLiveSessions(), 1);
  ASSERT_TRUE(repl->SetMaxLiveSessions(3).ok());
  for (const char* sid : {"a", "b", "c"}) MustRun(*repl, sid, "x = 1");
  EXPECT_EQ(repl->Evictions(), 0u);
  EXPECT_EQ(repl->LiveSessions().size(), 3u);
  ASSERT_TRUE(repl->SetMaxLiveSessions(1).ok());
  EXPECT_EQ(repl->LiveSessions().size(), 3u);  // not at once
  MustRun(*repl, "d", "x = 2");
  EXPECT_EQ(repl->Evictions(), 3u);
  EXPECT_EQ(repl->LiveSessions(), std::vector<std::string>{"d"});
  EXPECT_EQ(MustRun(*repl, "a", "x").value, "1");  // restored from the store
}

// A long-lived Repl (an MCP server, a server profile) that has seen many
// session ids keeps slots only for the live ones and the work in flight,
// and a restore costs the same after 10,000 ids as after 1,000: counted in
// slots looked at, not timed.
TEST(Repl, ManySessionIdsKeepTheSlotMapAndTheRestoreCostFlat) {
  ReplOptions options;
  options.store = std::make_shared<MemoryStore>();
  options.max_live_sessions = 2;
  options.snapshots = false;                  // one process per session, no more
  options.checkpoint = CheckpointMode::kOff;  // eviction checkpoints anyway
  options.config.typecheck = false;
  auto repl = std::move(Repl::Create(options)).value();
  constexpr int kIds = 10000;
  std::uint64_t scans_at_1000 = 0, scans_at_2000 = 0;
  std::size_t most_slots = 0;
  for (int i = 0; i < kIds; ++i) {
    Result r = MustRun(*repl, "id-" + std::to_string(i), "x = 1");
    ASSERT_TRUE(r.ok) << r.error.value_or("");
    most_slots = std::max(most_slots, repl->SlotCountForTesting());
    if (i == 1000) scans_at_1000 = repl->EvictionScansForTesting();
    if (i == 2000) scans_at_2000 = repl->EvictionScansForTesting();
  }
  const std::uint64_t early = scans_at_2000 - scans_at_1000;
  const std::uint64_t late = repl->EvictionScansForTesting() - scans_at_2000;
  // Flat: at most the sweep's floor (64) twice over, not one slot per id.
  EXPECT_LE(most_slots, 256u);
  // The last 8,000 ids cost at most 8 times the 1,000 after the first
  // (the same per id), with room for the sweep's sawtooth.
  EXPECT_LE(late, 8 * early * 2) << "early " << early << ", late " << late;
  // A session seen long ago still comes back from the store.
  EXPECT_EQ(MustRun(*repl, "id-0", "x").value, "1");
}

// A server runs each caller's cells in that caller's directory and
// environment: the worker starts there, sys.path starts there, and the
// host's own environment does not leak in.
TEST(Repl, WorkerDirectoryAndBaseEnvironment) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("dolsot-repl-placement-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "placed_module.py") << "WHERE = 'placed'\n";
  }
  ReplOptions options;
  options.store = std::make_shared<MemoryStore>();
  options.config.typecheck = false;
  options.worker_directory = dir.string();
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.push_back("DOLSOT_PLACEMENT_PROBE=from-the-caller");
  options.worker_base_environment = env;
  ::setenv("DOLSOT_HOST_ONLY_PROBE", "host", 1);
  auto repl = std::move(Repl::Create(options)).value();
  EXPECT_EQ(MustRun(*repl, "p", "import os; os.getcwd()").value, "'" + dir.string() + "'");
  EXPECT_EQ(MustRun(*repl, "p", "import placed_module; placed_module.WHERE").value, "'placed'");
  EXPECT_EQ(MustRun(*repl, "p", "os.environ.get('DOLSOT_PLACEMENT_PROBE')").value,
            "'from-the-caller'");
  EXPECT_EQ(MustRun(*repl, "p", "str(os.environ.get('DOLSOT_HOST_ONLY_PROBE'))").value, "'None'");
  ::unsetenv("DOLSOT_HOST_ONLY_PROBE");
  EXPECT_TRUE(repl->Close().ok());
  std::filesystem::remove_all(dir);
}

TEST(Repl, AMissingWorkerDirectoryIsNamedInTheError) {
  ReplOptions options;
  options.store = std::make_shared<MemoryStore>();
  options.config.typecheck = false;
  options.worker_directory = "/nonexistent/dolsot-no-such-directory";
  auto repl = std::move(Repl::Create(options)).value();
  auto result = repl->Run("p", "1", {});
  // Nothing ran: a refusal, or a failed Result naming the directory.
  const std::string why = result.ok() ? result->error.value_or("") : result.status().message();
  EXPECT_FALSE(result.ok() && result->ok);
  EXPECT_NE(why.find("/nonexistent/dolsot-no-such-directory"), std::string::npos) << why;
}

// Release: the session's state goes to the store and its process ends; the
// next run restores it (a live-only object, a thread, does not survive).
TEST(Repl, ReleaseCheckpointsAndEndsTheLiveSession) {
  auto store = std::make_shared<MemoryStore>();
  auto repl = MakeRepl(store, CheckpointMode::kOff);
  MustRun(*repl, "r", "x = 41");
  MustRun(*repl, "other", "y = 1");
  EXPECT_EQ(repl->LiveSessions(), (std::vector<std::string>{"other", "r"}));
  ASSERT_TRUE(repl->Release("r").ok());
  EXPECT_EQ(repl->LiveSessions(), (std::vector<std::string>{"other"}));
  auto stored = store->Load("r");
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->has_value());  // checkpointed although checkpoints are off
  EXPECT_EQ(MustRun(*repl, "r", "x + 1").value, "42");
  EXPECT_TRUE(repl->Release("never-ran").ok());
  EXPECT_FALSE(repl->Release("bad id!").ok());
}

// A checkpoint bigger than one frame may hold goes in parts both ways: to
// the store (with the Result in sync mode, on its own channel in async mode)
// and back into a new session process (LOAD).
TEST(Repl, ACheckpointOverTheFrameCapIsSavedAndRestored) {
  const std::size_t size = protocol::kMaxFrameBytes + (5u << 20);
  for (CheckpointMode mode : {CheckpointMode::kSync, CheckpointMode::kAsync}) {
    auto store = std::make_shared<MemoryStore>();
    {
      auto repl = MakeRepl(store, mode);
      Result r = MustRun(*repl, "big", "blob = b'x' * " + std::to_string(size) + " + b'end'");
      EXPECT_TRUE(r.ok) << r.error.value_or("");
      ASSERT_TRUE(repl->Close().ok());  // flushes an async checkpoint
    }
    auto saved = store->Load("big");
    ASSERT_TRUE(saved.ok() && saved->has_value());
    EXPECT_GT((*saved)->size(), size);
    auto repl = MakeRepl(store, mode);
    Result back = MustRun(*repl, "big", "len(blob), blob[-3:]");
    EXPECT_EQ(back.value, "(" + std::to_string(size + 3) + ", b'end')") << back.error.value_or("");
  }
}

// max_output=0 means no cap: a Result (and the output streamed before it)
// over one frame arrives whole.
TEST(Repl, AnUncappedResultOverTheFrameCapArrivesWhole) {
  ReplOptions options;
  options.store = std::make_shared<MemoryStore>();
  options.config.typecheck = false;
  options.config.max_output = 0;
  auto repl = std::move(Repl::Create(options)).value();
  const std::size_t size = protocol::kMaxFrameBytes + 1000;
  Result r = MustRun(*repl, "s", "print('x' * " + std::to_string(size) + ")");
  EXPECT_TRUE(r.ok) << r.error.value_or("");
  EXPECT_EQ(r.stdout_text.size(), size + 1);
}


class EvictionModes : public ::testing::TestWithParam<CheckpointMode> {};

// Eviction once killed a session whatever became of its checkpoint: with a
// store that cannot save, its state was lost without a word.
TEST_P(EvictionModes, ASessionWhoseCheckpointIsNotSavedStaysLive) {
  ReplOptions options;
  options.store = std::make_shared<FailingStore>();
  options.max_live_sessions = 1;
  options.checkpoint = GetParam();
  options.config.typecheck = false;
  auto repl = std::move(Repl::Create(options)).value();
  MustRun(*repl, "one", "a = 1");
  Result two = MustRun(*repl, "two", "b = 2");  // would evict "one"
  EXPECT_TRUE(two.ok) << two.error.value_or("");
  // Reported with the Result of the session it was evicted for, whatever
  // the checkpoint mode.
  ASSERT_TRUE(two.error.has_value());
  EXPECT_NE(two.error->find("session 'one' stays live over max_live_sessions=1: its "
                            "checkpoint could not be saved (disk full)"),
            std::string::npos)
      << *two.error;
  EXPECT_TRUE(two.save_error.has_value());
  Result again = MustRun(*repl, "one", "a");
  EXPECT_EQ(again.value, "1") << again.error.value_or("");
  EXPECT_EQ(MustRun(*repl, "two", "b").value, "2");
  EXPECT_EQ(repl->Sessions().value().size(), 2u);  // both live, over the limit
  EXPECT_EQ(repl->Evictions(), 0u);                 // nothing was evicted
}

INSTANTIATE_TEST_SUITE_P(All, EvictionModes,
                         ::testing::Values(CheckpointMode::kSync, CheckpointMode::kAsync,
                                           CheckpointMode::kOff));


// A C++ host serving a tool: the cell's call reaches the dispatcher on the
// run's thread, the reply (a pickle the host made, here of 42) comes back from
// another thread; a name the host no longer serves is a LookupError in the
// cell; the final-answer function sends its value back pickled.
TEST(Repl, ACppHostServesToolCallsFromAnotherThread) {
  auto repl = repl_testing::MakeTestRepl(/*snapshots=*/true, CheckpointMode::kOff);
  std::vector<std::thread> servers;
  std::vector<std::string> asked;
  RunOptions options;
  options.tools.names = {"answer", "gone"};
  options.tools.final_name = "SUBMIT";
  options.tools.dispatch = [&](ToolCall call, ToolReplyFn done) {
    asked.push_back(call.name);
    if (call.name == "gone") {
      done(ToolReply{false, ""});
      return;
    }
    servers.emplace_back([done] { done(ToolReply{true, std::string("\x80\x05K*.", 5)}); });
  };
  auto r = repl->Run("s", "x = answer(1, key='v')\nx + 1", options);
  for (auto& t : servers) t.join();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->ok) << r->error.value_or("");
  EXPECT_EQ(r->value.value_or(""), "43");
  EXPECT_EQ(r->held, std::vector<std::string>{"x"});
  EXPECT_EQ(asked, std::vector<std::string>{"answer"});

  auto gone = repl->Run("s", "gone()", options);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->ok);
  EXPECT_EQ(gone->error_type.value_or(""), "LookupError");

  auto submitted = repl->Run("s", "SUBMIT(x)", options);
  ASSERT_TRUE(submitted.ok());
  EXPECT_TRUE(submitted->ok);
  ASSERT_TRUE(submitted->returned.has_value());
  EXPECT_EQ(submitted->returned->pickle.substr(0, 2), std::string("\x80\x05", 2));

  RunOptions bad;
  bad.tools.names = {"len"};
  EXPECT_EQ(repl->Run("s", "1", bad).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace dolsot
