// A checkpoint's journal (backend_subprocess/checkpoint_journal.h): frames
// round-trip and merge in order; a torn, damaged, foreign or misordered
// frame stops the journal there and is named; the host's account of which
// frame can be written follows the store's base.
#include "backend_subprocess/checkpoint_journal.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend_subprocess/checkpoint_format.h"
#include "core/crc32c.h"

namespace dolsot {
namespace {

using checkpoint_format::PutLe;

// A base blob as the format frames it (header, entries with their
// checksums); `tag` varies its one entry's payload.
std::string Base(const std::string& tag) {
  std::string blob = "DOLSOTNS";
  blob.resize(16);
  PutLe(blob.data() + 8, 3, 4);
  PutLe(blob.data() + 12, 1, 4);
  const std::string name = "x";
  std::string entry(4 + 1 + 4 + name.size() + 8 + tag.size(), '\0');
  entry[4] = 1;
  PutLe(entry.data() + 5, name.size(), 4);
  std::memcpy(entry.data() + 9, name.data(), name.size());
  PutLe(entry.data() + 9 + name.size(), tag.size(), 8);
  std::memcpy(entry.data() + 17 + name.size(), tag.data(), tag.size());
  PutLe(entry.data(), Crc32c(std::string_view(entry).substr(4)), 4);
  return blob + entry;
}

protocol::Bindings Bound(std::uint64_t cells_run, std::vector<std::string> names,
                         std::vector<std::string> values) {
  return protocol::Bindings{cells_run, std::move(names), std::move(values)};
}

CheckpointBase Measured(const std::string& base) {
  StatusOr<CheckpointBase> measured = MeasureBase(base);
  EXPECT_TRUE(measured.ok()) << measured.status().ToString();
  return measured.ok() ? *measured : CheckpointBase{};
}

TEST(CheckpointJournal, FramesMergeInOrderOverTheirBase) {
  const std::string base = Base("payload");
  const CheckpointBase measured = Measured(base);
  EXPECT_EQ(measured.size, base.size());
  const std::string frames =
      EncodeJournalFrame(measured, 1, Bound(4, {"x", "y"}, {"x1", std::string("y\0", 2)})) +
      EncodeJournalFrame(measured, 2, Bound(5, {}, {})) +
      EncodeJournalFrame(measured, 3, Bound(7, {"x", "a"}, {"x3", "a3"}));
  const std::string stored = base + frames;
  const SplitCheckpoint split = SplitJournal(stored);  // views into `stored`
  EXPECT_EQ(split.base, base);
  EXPECT_TRUE(split.damage.empty()) << split.damage;
  EXPECT_EQ(split.frames, 3u);
  EXPECT_EQ(split.journal_bytes, frames.size());
  EXPECT_EQ(split.bindings.cells_run, 7u);
  // The last value of each name, the names in the order first bound (as
  // the session's namespace holds them), not sorted.
  EXPECT_EQ(split.bindings.names, (std::vector<std::string>{"x", "y", "a"}));
  EXPECT_EQ(split.bindings.values, (std::vector<std::string>{"x3", std::string("y\0", 2), "a3"}));
}

TEST(CheckpointJournal, ABaseAloneHasNoJournal) {
  const std::string base = Base("payload");
  const SplitCheckpoint split = SplitJournal(base);
  EXPECT_EQ(split.base, base);
  EXPECT_EQ(split.frames, 0u);
  EXPECT_TRUE(split.damage.empty());
  EXPECT_TRUE(split.bindings.names.empty());
  // What is no checkpoint at all goes whole to the restore, which says why.
  for (const std::string& junk : {std::string(), std::string("DOLSOTNS"), std::string(100, 'z')}) {
    const SplitCheckpoint whole = SplitJournal(junk);
    EXPECT_EQ(whole.base, junk);
    EXPECT_EQ(whole.frames, 0u);
  }
}

TEST(CheckpointJournal, ATornLastFrameKeepsTheFramesBeforeIt) {
  const std::string base = Base("payload");
  const CheckpointBase measured = Measured(base);
  const std::string first = EncodeJournalFrame(measured, 1, Bound(2, {"x"}, {"one"}));
  const std::string second = EncodeJournalFrame(measured, 2, Bound(3, {"x", "y"}, {"two", "y2"}));
  for (std::size_t cut = 1; cut < second.size(); ++cut) {
    const SplitCheckpoint split = SplitJournal(base + first + second.substr(0, cut));
    ASSERT_EQ(split.frames, 1u) << cut;
    EXPECT_EQ(split.bindings.names, std::vector<std::string>{"x"}) << cut;
    EXPECT_EQ(split.bindings.values, std::vector<std::string>{"one"}) << cut;
    EXPECT_EQ(split.bindings.cells_run, 2u);
    EXPECT_NE(split.damage.find("journal frame 2"), std::string::npos) << split.damage;
  }
}

TEST(CheckpointJournal, EveryFlippedBitOfAFrameIsFoundAndStopsTheJournalThere) {
  const std::string base = Base("payload");
  const CheckpointBase measured = Measured(base);
  const std::string first = EncodeJournalFrame(measured, 1, Bound(2, {"x"}, {"one"}));
  const std::string second = EncodeJournalFrame(measured, 2, Bound(3, {"y"}, {"two"}));
  const std::string third = EncodeJournalFrame(measured, 3, Bound(4, {"z"}, {"three"}));
  for (std::size_t byte = 0; byte < second.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = second;
      damaged[byte] = static_cast<char>(damaged[byte] ^ (1 << bit));
      const SplitCheckpoint split = SplitJournal(base + first + damaged + third);
      ASSERT_EQ(split.frames, 1u) << byte << ":" << bit;
      ASSERT_FALSE(split.damage.empty());
      EXPECT_EQ(split.bindings.names, std::vector<std::string>{"x"});
    }
  }
}

TEST(CheckpointJournal, AFrameOfAnotherBaseOrOutOfOrderIsNotApplied) {
  const std::string base = Base("payload");
  const std::string other = Base("another");  // same size, other content
  ASSERT_EQ(base.size(), other.size());
  const CheckpointBase measured = Measured(base);
  const std::string mine = EncodeJournalFrame(measured, 1, Bound(2, {"x"}, {"mine"}));
  const std::string theirs = EncodeJournalFrame(Measured(other), 2, Bound(3, {"x"}, {"theirs"}));
  SplitCheckpoint split = SplitJournal(base + mine + theirs);
  EXPECT_EQ(split.frames, 1u);
  EXPECT_EQ(split.bindings.values, std::vector<std::string>{"mine"});
  EXPECT_NE(split.damage.find("another checkpoint"), std::string::npos) << split.damage;

  const std::string replayed = EncodeJournalFrame(measured, 1, Bound(3, {"x"}, {"again"}));
  split = SplitJournal(base + mine + replayed);
  EXPECT_EQ(split.frames, 1u);
  EXPECT_EQ(split.bindings.values, std::vector<std::string>{"mine"});
  EXPECT_NE(split.damage.find("out of order"), std::string::npos) << split.damage;

  split = SplitJournal(base + mine + std::string(40, '\0'));
  EXPECT_EQ(split.frames, 1u);
  EXPECT_NE(split.damage.find("not a journal frame"), std::string::npos) << split.damage;
}

// The frame NextFrame gives, split over `base` as the store would hold it.
SplitCheckpoint Stored(const std::string& base, const SessionJournal& journal) {
  std::optional<std::string> frame = journal.NextFrame();
  EXPECT_TRUE(frame.has_value());
  return SplitJournal(base + frame.value_or(""));
}

TEST(SessionJournal, AFrameWaitsForTheBaseItsValuesExtend) {
  const std::string base = Base("payload");
  SessionJournal journal;
  EXPECT_FALSE(journal.CanAppend());  // no base yet
  journal.Covered(3);                 // a checkpoint of cell 3 on its way
  journal.Add(Bound(4, {"x"}, {"x4"}));
  EXPECT_FALSE(journal.CanAppend());
  journal.BaseSaved(Measured(base), 2);  // an older one landed: not that base
  EXPECT_FALSE(journal.CanAppend());
  EXPECT_FALSE(journal.NextFrame().has_value());
  journal.BaseSaved(Measured(base), 3);
  ASSERT_TRUE(journal.CanAppend());
  SplitCheckpoint split = Stored(base, journal);
  EXPECT_EQ(split.frames, 1u);
  EXPECT_EQ(split.bindings.cells_run, 4u);
  EXPECT_EQ(split.bindings.values, std::vector<std::string>{"x4"});

  const std::string first = *journal.NextFrame();
  EXPECT_EQ(journal.Appended(first.size(), 4), std::vector<std::string>{"x"});
  journal.Add(Bound(5, {"y"}, {"y5"}));
  split = SplitJournal(base + first + *journal.NextFrame());
  EXPECT_EQ(split.frames, 2u);  // numbered on from the first
  EXPECT_EQ(split.bindings.names, (std::vector<std::string>{"x", "y"}));
}

TEST(SessionJournal, AnyOtherChangeOrAFailedAppendMeansAWholeCheckpoint) {
  const std::string base = Base("payload");
  SessionJournal journal;
  journal.Covered(1);
  journal.BaseSaved(Measured(base), 1);
  journal.Add(Bound(2, {"x"}, {"x2"}));
  journal.Break();  // a cell that took the general path, with no checkpoint
  journal.Add(Bound(3, {"y"}, {"y3"}));
  EXPECT_FALSE(journal.CanAppend());
  journal.Covered(4);
  journal.BaseSaved(Measured(base), 4);
  EXPECT_TRUE(journal.CanAppend());
  journal.Failed();  // part of a frame may be in the store
  EXPECT_FALSE(journal.CanAppend());
  journal.Covered(5);
  journal.BaseSaved(std::nullopt, 5);  // that save failed
  EXPECT_FALSE(journal.CanAppend());
}

TEST(SessionJournal, RestoredFromAnIntactJournalItAppendsAfterIt) {
  const std::string base = Base("payload");
  const std::string first = EncodeJournalFrame(Measured(base), 1, Bound(2, {"x"}, {"x2"}));
  SessionJournal journal;
  journal.Restored(SplitJournal(base + first), 0);
  journal.Add(Bound(3, {"y"}, {"y3"}));
  const SplitCheckpoint split = SplitJournal(base + first + *journal.NextFrame());
  EXPECT_EQ(split.frames, 2u);
  EXPECT_TRUE(split.damage.empty());

  SessionJournal torn;  // never after a damaged journal
  torn.Restored(SplitJournal(base + first.substr(0, first.size() - 1)), 0);
  torn.Add(Bound(3, {"y"}, {"y3"}));
  EXPECT_FALSE(torn.CanAppend());
  SessionJournal unmeasured;
  unmeasured.Restored(SplitJournal("not a checkpoint"), 0);
  EXPECT_FALSE(unmeasured.CanAppend());
}

TEST(SessionJournal, ItsBoundsSendALongJournalBackToAWholeCheckpoint) {
  const std::string base = Base("payload");
  SessionJournal journal;
  journal.Covered(0);
  journal.BaseSaved(Measured(base), 0);
  std::uint64_t cell = 0;
  for (std::uint32_t i = 0; i < SessionJournal::kMaxFrames; ++i) {
    journal.Add(Bound(++cell, {"x"}, {"v"}));
    std::optional<std::string> frame = journal.NextFrame();
    ASSERT_TRUE(frame.has_value()) << i;
    journal.Appended(frame->size(), cell);
  }
  journal.Add(Bound(++cell, {"x"}, {"v"}));
  EXPECT_FALSE(journal.CanAppend());  // kMaxFrames written

  SessionJournal long_name;  // a name no frame may hold: a whole checkpoint
  long_name.Covered(0);
  long_name.BaseSaved(Measured(base), 0);
  long_name.Add(Bound(1, {std::string(kMaxJournalNameBytes + 1, 'n')}, {"v"}));
  EXPECT_FALSE(long_name.CanAppend());

  SessionJournal big;  // values past kMaxPendingBytes: a whole checkpoint
  big.Covered(0);
  big.BaseSaved(Measured(base), 0);
  for (int i = 0; i < 20; ++i) {
    big.Add(Bound(1, {"v" + std::to_string(i)}, {std::string(64 << 10, 'x')}));
  }
  EXPECT_FALSE(big.CanAppend());
}

// A delta frame's blob as a test writes it: any whole checkpoint blob.
std::string DeltaBlob(const std::string& tag) { return Base(tag); }

TEST(CheckpointJournal, TheLastDeltaFrameHoldsTheStateAndBindingFramesAfterItApply) {
  const std::string base = Base("payload");
  const CheckpointBase m = Measured(base);
  const std::string first_delta = DeltaBlob("first delta");
  const std::string second_delta = DeltaBlob("second delta");
  const std::string upto_first_delta = EncodeJournalFrame(m, 1, Bound(2, {"a"}, {"a2"})) +
                                       EncodeDeltaFrame(m, 2, {"x"}, first_delta) +
                                       EncodeJournalFrame(m, 3, Bound(4, {"b"}, {"b4"}));
  const std::string rest = EncodeDeltaFrame(m, 4, {}, second_delta) +
                           EncodeJournalFrame(m, 5, Bound(6, {"c"}, {"c6"}));
  const std::string stored = base + upto_first_delta + rest;
  SplitCheckpoint split = SplitJournal(stored);
  EXPECT_TRUE(split.damage.empty()) << split.damage;
  EXPECT_EQ(split.frames, 5u);
  EXPECT_EQ(split.journal_bytes, upto_first_delta.size() + rest.size());
  ASSERT_TRUE(split.has_delta);
  EXPECT_TRUE(split.delta_kept.empty());
  EXPECT_EQ(split.delta_blob, second_delta);
  // Only what binding cells bound after the last delta: it holds the rest.
  EXPECT_EQ(split.bindings.names, std::vector<std::string>{"c"});
  EXPECT_EQ(split.bindings.cells_run, 6u);

  split = SplitJournal(base + upto_first_delta);
  ASSERT_TRUE(split.has_delta);
  EXPECT_EQ(split.delta_kept, std::vector<std::string>{"x"});
  EXPECT_EQ(split.delta_blob, first_delta);
  EXPECT_EQ(split.bindings.names, std::vector<std::string>{"b"});
}

TEST(CheckpointJournal, ADamagedOrMalformedDeltaFrameStopsTheJournalThere) {
  const std::string base = Base("payload");
  const CheckpointBase m = Measured(base);
  const std::string before = EncodeJournalFrame(m, 1, Bound(2, {"a"}, {"a2"}));
  const std::string delta = EncodeDeltaFrame(m, 2, {"k", "x"}, DeltaBlob("delta"));
  for (std::size_t byte = 0; byte < delta.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = delta;
      damaged[byte] = static_cast<char>(damaged[byte] ^ (1 << bit));
      const SplitCheckpoint split = SplitJournal(base + before + damaged);
      ASSERT_EQ(split.frames, 1u) << byte << ":" << bit;
      ASSERT_FALSE(split.has_delta) << byte << ":" << bit;
      ASSERT_FALSE(split.damage.empty());
      EXPECT_EQ(split.bindings.names, std::vector<std::string>{"a"});
    }
  }
  // Well sealed but not a delta dolsot writes: kept names out of order or
  // repeated, a blob with bytes after its last entry, or no blob at all.
  for (const std::string& malformed :
       {EncodeDeltaFrame(m, 2, {"x", "k"}, DeltaBlob("d")),
        EncodeDeltaFrame(m, 2, {"k", "k"}, DeltaBlob("d")),
        EncodeDeltaFrame(m, 2, {}, DeltaBlob("d") + "zz"),
        EncodeDeltaFrame(m, 2, {}, "not a checkpoint")}) {
    const SplitCheckpoint split = SplitJournal(base + before + malformed);
    EXPECT_EQ(split.frames, 1u);
    EXPECT_FALSE(split.has_delta);
    EXPECT_NE(split.damage.find("malformed"), std::string::npos) << split.damage;
  }
  const std::string other = Base("another");
  const SplitCheckpoint split =
      SplitJournal(base + before + EncodeDeltaFrame(Measured(other), 2, {}, DeltaBlob("d")));
  EXPECT_FALSE(split.has_delta);
  EXPECT_NE(split.damage.find("another checkpoint"), std::string::npos) << split.damage;
}

TEST(BaseDigests, EachValueEntryHasTheDigestOfItsBytesAfterTheChecksum) {
  const std::string base = Base("payload");
  StatusOr<BaseDigests> digests = DigestBase(base + EncodeJournalFrame(Measured(base), 1, {}));
  ASSERT_TRUE(digests.ok()) << digests.status().ToString();
  EXPECT_EQ(digests->base.size, base.size());
  ASSERT_EQ(digests->entries.size(), 1u);
  // Base()'s entry: codec 1, name "x", payload "payload".
  std::string prefix(1 + 4 + 1 + 8, '\0');
  prefix[0] = 1;
  PutLe(prefix.data() + 1, 1, 4);
  prefix[5] = 'x';
  PutLe(prefix.data() + 6, 7, 8);
  EXPECT_EQ(digests->entries.at("x"), EntryDigest(prefix, "payload"));
  EXPECT_EQ(digests->entries.at("x"), DigestOf("payload" + prefix));
  // Any other payload, or the same one cut differently, differs.
  EXPECT_NE(DigestBase(Base("payloaD"))->entries.at("x"), digests->entries.at("x"));
  EXPECT_NE(EntryDigest(prefix, "payload!"), digests->entries.at("x"));
  EXPECT_FALSE(DigestBase("DOLSOTNS").ok());
}

std::shared_ptr<const BaseDigests> DigestsOf(const std::string& base) {
  StatusOr<BaseDigests> digests = DigestBase(base);
  EXPECT_TRUE(digests.ok()) << digests.status().ToString();
  return digests.ok() ? std::make_shared<const BaseDigests>(*std::move(digests)) : nullptr;
}

TEST(SessionJournal, ADeltaFrameExtendsOnlyTheBaseItWasTakenAgainst) {
  const std::string base = Base(std::string(SessionJournal::kMinDeltaBase, 'p'));
  const CheckpointBase m = Measured(base);
  SessionJournal journal;
  journal.Covered(1);
  EXPECT_EQ(journal.DeltaBase(), nullptr);  // nothing stored yet
  journal.BaseSaved(m, 1, DigestsOf(base));
  std::shared_ptr<const BaseDigests> offered = journal.DeltaBase();
  ASSERT_NE(offered, nullptr);
  EXPECT_EQ(offered->base.size, m.size);
  EXPECT_EQ(offered->base.fingerprint, m.fingerprint);

  const std::string blob = DeltaBlob("delta");
  const std::string other = Base(std::string(SessionJournal::kMinDeltaBase, 'q'));
  EXPECT_FALSE(journal.DeltaFrame(Measured(other), {}, blob).has_value());
  std::optional<std::string> frame = journal.DeltaFrame(m, {"x"}, blob);
  ASSERT_TRUE(frame.has_value());
  journal.Covered(2);  // cell 2's delta on its way, then stored
  journal.DeltaAppended(frame->size(), 2);
  journal.Add(Bound(3, {"y"}, {"y3"}));  // a binding cell after it
  ASSERT_TRUE(journal.CanAppend());
  const SplitCheckpoint split = SplitJournal(base + *frame + *journal.NextFrame());
  EXPECT_TRUE(split.damage.empty()) << split.damage;
  EXPECT_EQ(split.frames, 2u);
  ASSERT_TRUE(split.has_delta);
  EXPECT_EQ(split.delta_kept, std::vector<std::string>{"x"});
  EXPECT_EQ(split.bindings.names, std::vector<std::string>{"y"});

  journal.Failed();  // an append that failed: whole checkpoints from here
  EXPECT_EQ(journal.DeltaBase(), nullptr);
  EXPECT_FALSE(journal.DeltaFrame(m, {}, blob).has_value());
}

TEST(SessionJournal, DeltasAreOfferedOnlyAgainstALargeBaseWithItsOwnDigests) {
  const std::string tiny = Base("payload");
  SessionJournal small;
  small.BaseSaved(Measured(tiny), 1, DigestsOf(tiny));
  EXPECT_EQ(small.DeltaBase(), nullptr);  // a whole checkpoint costs less

  const std::string base = Base(std::string(SessionJournal::kMinDeltaBase, 'p'));
  const std::string other = Base(std::string(SessionJournal::kMinDeltaBase, 'q'));
  SessionJournal mismatched;
  mismatched.BaseSaved(Measured(base), 1, DigestsOf(other));
  EXPECT_EQ(mismatched.DeltaBase(), nullptr);
  SessionJournal undigested;
  undigested.BaseSaved(Measured(base), 1);
  EXPECT_EQ(undigested.DeltaBase(), nullptr);
  SessionJournal restored;
  restored.Restored(SplitJournal(base), 1, DigestsOf(base));
  EXPECT_NE(restored.DeltaBase(), nullptr);
}

TEST(SessionJournal, DeltasStopBeingOfferedOnceTheyFillHalfTheJournal) {
  const std::string base = Base(std::string(4 * SessionJournal::kMinDeltaBase, 'p'));
  const CheckpointBase m = Measured(base);
  SessionJournal journal;
  journal.BaseSaved(m, 1, DigestsOf(base));
  const std::string blob = DeltaBlob(std::string(base.size() / 5, 'd'));
  std::uint64_t cell = 1;
  int appended = 0;
  while (journal.DeltaBase() != nullptr) {
    std::optional<std::string> frame = journal.DeltaFrame(m, {}, blob);
    ASSERT_TRUE(frame.has_value()) << appended;
    journal.DeltaAppended(frame->size(), ++cell);
    ++appended;
  }
  EXPECT_EQ(appended, 3);  // past half the base's size: no more offers
  // One taken against it before that still fits the journal; past its
  // bounds, none does.
  std::optional<std::string> late = journal.DeltaFrame(m, {}, blob);
  ASSERT_TRUE(late.has_value());
  journal.DeltaAppended(late->size(), ++cell);
  EXPECT_FALSE(journal.DeltaFrame(m, {}, blob).has_value());
}

}  // namespace
}  // namespace dolsot
