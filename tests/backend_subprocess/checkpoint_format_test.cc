// The checkpoint blob's format (backend_subprocess/checkpoint_format.h), with
// no Python: what BuildBlob writes ParseBlob reads back, and damage is named
// with where it is.
#include "backend_subprocess/checkpoint_format.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dolsot {
namespace {

using namespace checkpoint_format;

std::string Counter(std::uint64_t cells) {
  std::string bytes(8, '\0');
  PutLe(bytes.data(), cells, 8);
  return bytes;
}

std::string TwoEntries() {
  const std::string counter = Counter(7);
  return BuildBlob({BlobEntry{Codec::kPickle, "x", {"ab", "", "cd"}},
                    BlobEntry{Codec::kCellCounter, kCounterName, {counter}}});
}

TEST(CheckpointFormat, WhatBuildBlobWritesParseBlobReads) {
  const std::string blob = TwoEntries();
  auto entries = ParseBlob(blob);
  ASSERT_TRUE(entries.ok()) << entries.status().message();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].codec, Codec::kPickle);
  EXPECT_EQ((*entries)[0].name, "x");
  EXPECT_EQ((*entries)[0].payload, "abcd");  // the pieces, concatenated
  EXPECT_EQ((*entries)[1].name, kCounterName);
  EXPECT_EQ(GetLe((*entries)[1].payload.data(), 8), 7u);
}

TEST(CheckpointFormat, ReadEntryFrameWalksTheEntries) {
  const std::string blob = TwoEntries();
  auto frame = ReadEntryFrame(blob, kHeaderSize, /*verify=*/true);
  ASSERT_TRUE(frame.ok());
  EXPECT_EQ(frame->codec, static_cast<std::uint8_t>(Codec::kPickle));
  EXPECT_EQ(frame->size, kEntryFixedSize + 1 + 4);
  auto next = ReadEntryFrame(blob, kHeaderSize + frame->size, /*verify=*/true);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(kHeaderSize + frame->size + next->size, blob.size());
}

TEST(CheckpointFormat, DamageIsNamedWithItsOffset) {
  std::string blob = TwoEntries();
  blob[kHeaderSize + kEntryFixedSize + 1] ^= 1;  // the first payload's first byte
  auto parsed = ParseBlob(blob);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), ErrorCode::kCorrupt);
  EXPECT_EQ(parsed.status().message(), "checkpoint blob: checksum mismatch at byte 16");
  // Lengths only: the frame still reads without verifying.
  EXPECT_TRUE(ReadEntryFrame(blob, kHeaderSize, /*verify=*/false).ok());

  const std::string cut = TwoEntries().substr(0, kHeaderSize + 5);
  auto truncated = ParseBlob(cut);
  ASSERT_FALSE(truncated.ok());
  EXPECT_FALSE(HasHeader("DOLSOTN"));
  EXPECT_FALSE(ParseBlob("not a checkpoint at all").ok());
}

TEST(CheckpointFormat, CellSourcesLiveOnlyUnderCellNames) {
  EXPECT_TRUE(IsCellFilename("<cell 1>"));
  EXPECT_TRUE(IsCellFilename("<cell 12345>"));
  EXPECT_FALSE(IsCellFilename("<cell 0>"));
  EXPECT_FALSE(IsCellFilename("<cell 01>"));
  EXPECT_FALSE(IsCellFilename("<cell >"));
  EXPECT_FALSE(IsCellFilename("<stdin>"));
  const std::string counter = Counter(1);
  const std::string blob = BuildBlob({BlobEntry{Codec::kCellSource, "<stdin>", {"x = 1"}},
                                      BlobEntry{Codec::kCellCounter, kCounterName, {counter}}});
  EXPECT_FALSE(ParseBlob(blob).ok());
}

}  // namespace
}  // namespace dolsot
