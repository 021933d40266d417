// SessionDurability (backend_subprocess/session_durability.h) without a
// worker: a store of our own, checkpoints made of the format's bytes, and a
// whole checkpoint "taken in place" by a function the test counts. What a
// cell's RUN says of checkpoints, what reaches the store (whole, journal
// frame), and what a Result reports (dropped names, saves that failed).
#include "backend_subprocess/session_durability.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "backend_subprocess/checkpoint_format.h"
#include "backend_subprocess/checkpoint_metadata.h"
#include "core/memory_store.h"

namespace dolsot {
namespace {

using namespace checkpoint_format;

// A MemoryStore that can be told to refuse saves, or to have no Append.
class TestStore final : public SessionStore {
 public:
  StatusOr<std::optional<std::string>> Load(std::string_view sid) override {
    return inner_.Load(sid);
  }
  Status Save(std::string_view sid, std::string_view blob) override {
    ++saves;
    if (fail_saves) return Status(ErrorCode::kIo, "disk full");
    return inner_.Save(sid, blob);
  }
  Status Append(std::string_view sid, std::string_view bytes) override {
    ++appends;
    if (!can_append) return Status(ErrorCode::kUnimplemented, "this session store cannot append");
    return inner_.Append(sid, bytes);
  }
  StatusOr<int> Delete(std::string_view sid) override { return inner_.Delete(sid); }
  StatusOr<std::vector<SessionInfo>> List() override { return inner_.List(); }

  bool fail_saves = false;
  bool can_append = true;
  int saves = 0;
  int appends = 0;

 private:
  MemoryStore inner_;
};

// A whole checkpoint blob as a session writes it: one value, its cell count.
std::string Blob(const std::string& value, std::uint64_t cells) {
  std::string counter(8, '\0');
  PutLe(counter.data(), cells, 8);
  return BuildBlob({BlobEntry{Codec::kPickle, "x", {value}},
                    BlobEntry{Codec::kCellCounter, kCounterName, {counter}}});
}

CheckpointData Whole(const std::string& value, std::uint64_t cells,
                     std::vector<std::string> dropped = {}) {
  CheckpointData data;
  data.blob = Blob(value, cells);
  data.dropped = std::move(dropped);
  return data;
}

// The timer's calls, as the Repl would get them.
struct DueCalls {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> seen;
  bool WaitFor(std::size_t n) {
    std::unique_lock<std::mutex> guard(mutex);
    return changed.wait_for(guard, std::chrono::seconds(30), [&] { return seen.size() >= n; });
  }
};

class SessionDurabilityTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(CheckpointMode::kSync); }

  void Make(CheckpointMode mode) {
    durability_.reset();
    context_.mode = mode;
    context_.delay_ns = 0;
    context_.store = &store_;
    context_.saver = &saver_;
    context_.timer = &timer_;
    durability_ = std::make_unique<SessionDurability>("s", context_, memory_);
  }

  // A whole checkpoint taken in place, counted.
  SessionDurability::TakeCheckpoint Take(const std::string& value = "taken") {
    return [this, value]() -> StatusOr<CheckpointData> {
      ++taken_;
      return Whole(value, 0);
    };
  }

  // One cell through BeginCell/EndCell; `shape` fills its outcome.
  template <typename Shape>
  Result RunCell(Shape shape, std::vector<std::string> held = {"x"}, CellRun* seen = nullptr) {
    CellRun run;
    const std::uint64_t cell = durability_->BeginCell(run);
    if (seen) *seen = run;
    CellOutcome outcome;
    outcome.result.held = std::move(held);
    shape(outcome);
    durability_->EndCell(cell, outcome, Take());
    return std::move(outcome.result);
  }

  std::string Stored() {
    auto loaded = store_.Load("s");
    return loaded.ok() && loaded->has_value() ? **loaded : std::string();
  }

  TestStore store_;
  SessionGateMemory memory_;
  CheckpointSaver saver_{[this](const std::string&, CheckpointData data, std::uint64_t cell) {
    durability_->SaveAsync(std::move(data), cell);
  }};
  DueCalls due_;
  CheckpointTimer timer_{[this](const std::string& sid) {
    std::lock_guard<std::mutex> guard(due_.mutex);
    due_.seen.push_back(sid);
    due_.changed.notify_all();
  }};
  DurabilityContext context_;
  std::unique_ptr<SessionDurability> durability_;
  int taken_ = 0;
};

TEST_F(SessionDurabilityTest, ANewSessionOwesACheckpointEvenForAReadOnlyCell) {
  durability_->Restored("", SplitJournal(""), nullptr);
  CellRun run;
  RunCell([](CellOutcome& o) { o.read_only = true; }, {}, &run);
  EXPECT_TRUE(run.checkpoint_owed);  // nothing durable yet
  EXPECT_EQ(run.delta_base, nullptr);
}

TEST_F(SessionDurabilityTest, ASyncCheckpointIsSavedWithTheHostsEntries) {
  GateMemory memory;
  memory.sealed_classes.insert("Account");
  memory_.Set(memory);
  durability_->Restored("", SplitJournal(""), nullptr);
  Result result = RunCell([](CellOutcome& o) { o.checkpoint = Whole("one", 1, {"f"}); },
                          {"x", "f"});
  EXPECT_FALSE(result.save_error.has_value());
  const std::string stored = Stored();
  StatusOr<GateMemory> read = ReadGateMemory(stored);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(*read, memory);

  // A read-only cell right after: the checkpoint is recent, none is owed,
  // and the last checkpoint's verdict on `f` still holds.
  CellRun run;
  result = RunCell([](CellOutcome& o) { o.read_only = true; }, {"x", "f"}, &run);
  EXPECT_FALSE(run.checkpoint_owed);
  EXPECT_EQ(result.dropped, std::vector<std::string>{"f"});
  EXPECT_TRUE(durability_->CatchUpWithoutSerializing());
  EXPECT_EQ(taken_, 0);
}

TEST_F(SessionDurabilityTest, AFailedSaveIsOnTheResultAndTheStateStillOwed) {
  durability_->Restored("", SplitJournal(""), nullptr);
  store_.fail_saves = true;
  Result result = RunCell([](CellOutcome& o) { o.checkpoint = Whole("one", 1); });
  ASSERT_TRUE(result.save_error.has_value());
  EXPECT_NE(result.error->find("warning: checkpoint not saved: disk full"), std::string::npos);
  EXPECT_FALSE(durability_->CatchUpWithoutSerializing());

  // Close's last chance: the state is saved once the store takes it.
  store_.fail_saves = false;
  durability_->SaveLastState(Take());
  EXPECT_EQ(taken_, 1);
  EXPECT_EQ(durability_->TakeSaveError(), "");
  EXPECT_TRUE(durability_->CatchUpWithoutSerializing());
}

TEST_F(SessionDurabilityTest, ABindingCellIsAJournalFrameWhenTheStoreHoldsItsBase) {
  const std::string base = Blob("base", 0);
  ASSERT_TRUE(store_.Save("s", base).ok());
  durability_->Restored(base, SplitJournal(base), nullptr);
  RunCell([](CellOutcome& o) {
    o.binding = true;
    o.bindings = protocol::Bindings{1, {"y"}, {"marshalled"}};
  });
  EXPECT_EQ(taken_, 0);  // the session was not asked to serialize
  EXPECT_EQ(store_.appends, 1);
  const SplitCheckpoint split = SplitJournal(Stored());
  EXPECT_TRUE(split.damage.empty()) << split.damage;
  EXPECT_EQ(split.frames, 1u);
  EXPECT_EQ(split.bindings.names, std::vector<std::string>{"y"});
}

TEST_F(SessionDurabilityTest, ABindingCellIsAWholeCheckpointWhenTheStoreCannotAppend) {
  const std::string base = Blob("base", 0);
  ASSERT_TRUE(store_.Save("s", base).ok());
  store_.can_append = false;
  durability_->Restored(base, SplitJournal(base), nullptr);
  RunCell([](CellOutcome& o) {
    o.binding = true;
    o.bindings = protocol::Bindings{1, {"y"}, {"marshalled"}};
  });
  EXPECT_EQ(taken_, 1);
  EXPECT_EQ(Stored(), [] {
    std::string blob = Blob("taken", 0);
    EXPECT_TRUE(AttachHostEntries(blob, GateMemory{}, std::nullopt).ok());
    return blob;
  }());
  // The store said it cannot append: no frame is tried again.
  RunCell([](CellOutcome& o) {
    o.binding = true;
    o.bindings = protocol::Bindings{2, {"y"}, {"again"}};
  });
  EXPECT_EQ(store_.appends, 1);
  EXPECT_EQ(taken_, 2);
}

TEST_F(SessionDurabilityTest, ADeltaTheStoreCannotTakeIsOwedWholeByTheTimer) {
  Make(CheckpointMode::kAsync);
  durability_->Restored("", SplitJournal(""), nullptr);
  CheckpointData delta = Whole("changed", 1);
  delta.delta = true;  // against a base the store does not hold
  durability_->SaveAsync(std::move(delta), 1);
  ASSERT_TRUE(due_.WaitFor(1));
  EXPECT_EQ(due_.seen.front(), "s");
  CellRun run;
  RunCell([](CellOutcome& o) { o.read_only = true; }, {"x"}, &run);
  EXPECT_TRUE(run.checkpoint_owed);
  durability_->SaveDue(Take());
  EXPECT_EQ(taken_, 1);
  EXPECT_TRUE(durability_->CatchUpWithoutSerializing());
}

TEST_F(SessionDurabilityTest, AsyncDroppedNamesFollowTheLastCheckpointUntilRebound) {
  Make(CheckpointMode::kAsync);
  durability_->Restored("", SplitJournal(""), nullptr);
  RunCell([](CellOutcome&) {}, {"x", "f"});                  // cell 1
  durability_->SaveAsync(Whole("one", 1, {"f"}), 1);         // its checkpoint lands
  Result result = RunCell([](CellOutcome& o) { o.read_only = true; }, {"x", "f"});
  EXPECT_EQ(result.dropped, std::vector<std::string>{"f"});
  // Cell 3 binds f anew (its probe found it saveable): the old verdict is stale.
  result = RunCell([](CellOutcome& o) { o.rebound = {"f"}; }, {"x", "f"});
  EXPECT_TRUE(result.dropped.empty());
}

TEST_F(SessionDurabilityTest, AFailedAsyncSaveIsReportedOnceAndOwedUntilThen) {
  Make(CheckpointMode::kAsync);
  durability_->Restored("", SplitJournal(""), nullptr);
  store_.fail_saves = true;
  durability_->SaveAsync(Whole("one", 1), 1);
  EXPECT_TRUE(durability_->Owes());  // its slot must not be forgotten
  store_.fail_saves = false;
  Result result = RunCell([](CellOutcome& o) { o.read_only = true; });
  ASSERT_TRUE(result.save_error.has_value());
  EXPECT_EQ(*result.save_error, "disk full");
  EXPECT_FALSE(durability_->Owes());
  result = RunCell([](CellOutcome& o) { o.read_only = true; });
  EXPECT_FALSE(result.save_error.has_value());
}

TEST_F(SessionDurabilityTest, ABranchCarriesItsSandboxMarkIntoItsCheckpoints) {
  durability_->set_sandbox_mark(std::string("mark-bytes"));
  CheckpointData data = Whole("branched", 0);
  ASSERT_TRUE(durability_->SaveBranched(data).ok());
  StatusOr<std::optional<std::string>> mark = ReadSandboxMark(Stored());
  ASSERT_TRUE(mark.ok()) << mark.status().message();
  EXPECT_EQ(mark->value_or(""), "mark-bytes");
}

}  // namespace
}  // namespace dolsot
