// The worker protocol over a socketpair: frames round trip with and without
// a passed descriptor, payloads are bounds-checked, and a truncated or
// oversized frame is a clear kCorrupt error, never a hang (nor an allocation
// of what it claims). A message over the frame cap goes in parts.
#include "backend_subprocess/protocol.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

namespace dolsot::protocol {
namespace {

std::pair<UniqueFd, UniqueFd> Pair() {
  auto pair = SocketPair();
  EXPECT_TRUE(pair.ok());
  return std::move(pair).value();
}

void RawWrite(int fd, const std::string& bytes) {
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
}

// `n` bytes read off `fd` (fewer at EOF).
std::string ReadExactly(int fd, std::size_t n) {
  std::string out(n, '\0');
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, out.data() + got, n - got);
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  out.resize(got);
  return out;
}

std::string Header(std::uint32_t tag, std::uint32_t length) {
  PayloadWriter w;
  w.U32(tag).U32(length);
  return w.Take();
}

TEST(Protocol, FrameRoundTrip) {
  auto [a, b] = Pair();
  ASSERT_TRUE(WriteFrame(a.get(), Tag::kRun, "hello").ok());
  ASSERT_TRUE(WriteFrame(a.get(), Tag::kRetire, "").ok());
  auto first = ReadFrame(b.get());
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->tag, Tag::kRun);
  EXPECT_EQ(first->payload, "hello");
  EXPECT_FALSE(first->fd.valid());
  auto second = ReadFrame(b.get());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->tag, Tag::kRetire);
  EXPECT_TRUE(second->payload.empty());
}

TEST(Protocol, BindingsRoundTripAndMalformedOnesAreCorrupt) {
  Bindings sent;
  sent.cells_run = 7;
  sent.names = {"x", "row"};
  sent.values = {std::string("\xe9\x01\x00\x00\x00", 5), "[1]"};
  PayloadWriter w;
  WriteBindings(w, sent);
  PayloadReader r(w.data());
  auto back = ReadBindings(r);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(r.Finish("bindings").ok());
  EXPECT_EQ(back->cells_run, 7u);
  EXPECT_EQ(back->names, sent.names);
  EXPECT_EQ(back->values, sent.values);
  // A session that sends a name without a value, an empty name or one with
  // a NUL byte gets kCorrupt, never a half-applied replay.
  for (auto [names, values] : {std::pair<std::vector<std::string>, std::vector<std::string>>{{"x", "y"}, {"1"}},
                               {{""}, {"1"}},
                               {{std::string("a\0b", 3)}, {"1"}}}) {
    PayloadWriter bad;
    bad.U64(1).Strs(names).Strs(values);
    PayloadReader in(bad.data());
    EXPECT_EQ(ReadBindings(in).status().code(), ErrorCode::kCorrupt);
  }
  PayloadReader truncated(std::string_view(w.data()).substr(0, 9));
  auto cut = ReadBindings(truncated);
  EXPECT_FALSE(cut.ok() && truncated.Finish("bindings").ok());
}

TEST(Protocol, BaseDigestsRoundTripAndMalformedOnesAreCorrupt) {
  BaseDigests sent;
  sent.base = CheckpointBase{123456789, 0xCAFEu};
  sent.entries["df"] = Digest128{1, 2};
  sent.entries["context"] = DigestOf("the context");
  PayloadWriter w;
  WriteBaseDigests(w, sent);
  PayloadReader r(w.data());
  auto back = ReadBaseDigests(r);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(r.Finish("base digests").ok());
  EXPECT_EQ(back->base.size, 123456789u);
  EXPECT_EQ(back->base.fingerprint, 0xCAFEu);
  EXPECT_EQ(back->entries, sent.entries);
  for (const std::string& name : {std::string(), std::string("a\0b", 3)}) {
    PayloadWriter bad;
    bad.U64(1).U32(2).U32(1).Str(name).U64(3).U64(4);
    PayloadReader in(bad.data());
    EXPECT_EQ(ReadBaseDigests(in).status().code(), ErrorCode::kCorrupt);
  }
  // A count far past what follows stops at the end, in one pass, and the
  // payload does not finish.
  PayloadWriter huge;
  huge.U64(1).U32(2).U32(0xFFFFFFFFu).Str("x").U64(3).U64(4);
  PayloadReader in(huge.data());
  auto cut = ReadBaseDigests(in);
  EXPECT_FALSE(cut.ok() && in.Finish("base digests").ok());
}

TEST(Protocol, LargeFrameCrossesInManyChunks) {
  auto [a, b] = Pair();
  std::string big(8 << 20, 'x');
  big[12345] = 'y';
  std::thread writer([&, fd = a.get()] { ASSERT_TRUE(WriteFrame(fd, Tag::kCheckpointData, big).ok()); });
  auto frame = ReadFrame(b.get());
  writer.join();
  ASSERT_TRUE(frame.ok());
  EXPECT_EQ(frame->payload, big);
}

TEST(Protocol, PassesADescriptorWithTheFrame) {
  auto [a, b] = Pair();
  auto [x, y] = Pair();
  ASSERT_TRUE(WriteFrame(a.get(), Tag::kRunner, "pid", x.get()).ok());
  x.Reset();
  auto frame = ReadFrame(b.get());
  ASSERT_TRUE(frame.ok());
  ASSERT_TRUE(frame->fd.valid());
  EXPECT_EQ(::fcntl(frame->fd.get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  ASSERT_TRUE(WriteFrame(frame->fd.get(), Tag::kOutput, "through the passed fd").ok());
  auto echoed = ReadFrame(y.get());
  ASSERT_TRUE(echoed.ok());
  EXPECT_EQ(echoed->payload, "through the passed fd");
}

TEST(Protocol, PassesTwoDescriptorsInOrder) {
  auto [a, b] = Pair();
  auto [x1, y1] = Pair();
  auto [x2, y2] = Pair();
  ASSERT_TRUE(WriteFrame(a.get(), Tag::kResult, "r", x1.get(), x2.get()).ok());
  x1.Reset();
  x2.Reset();
  auto frame = ReadFrame(b.get());
  ASSERT_TRUE(frame.ok());
  ASSERT_TRUE(frame->fd.valid());
  ASSERT_TRUE(frame->fd2.valid());
  ASSERT_TRUE(WriteFrame(frame->fd.get(), Tag::kOutput, "first").ok());
  ASSERT_TRUE(WriteFrame(frame->fd2.get(), Tag::kOutput, "second").ok());
  auto first = ReadFrame(y1.get());
  auto second = ReadFrame(y2.get());
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->payload, "first");
  EXPECT_EQ(second->payload, "second");
}

// A process out of file descriptors cannot take the ones a frame carries
// (the kernel drops them): ReadFrame says so by name, after reading the whole
// message, so the next frame on the stream still reads.
TEST(Protocol, DescriptorsDroppedForWantOfFilesAreANamedErrorAndTheStreamStaysInStep) {
  auto [a, b] = Pair();
  auto [x, y] = Pair();
  ASSERT_TRUE(WriteFrame(a.get(), Tag::kOpened, "carried", x.get(), y.get()).ok());
  ASSERT_TRUE(WriteFrame(a.get(), Tag::kResult, "next").ok());
  x.Reset();
  y.Reset();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) ::_exit(2);
    limit.rlim_cur = 64;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) ::_exit(2);
    while (::fcntl(b.get(), F_DUPFD_CLOEXEC, 0) >= 0) {
    }
    if (errno != EMFILE) ::_exit(3);
    auto frame = ReadFrame(b.get());
    if (frame.ok()) ::_exit(4);
    if (!DescriptorsDropped(frame.status()) || frame.status().code() != ErrorCode::kIo) ::_exit(5);
    const std::string& message = frame.status().message();
    if (message.find("OPENED") == std::string::npos ||
        message.find("out of file descriptors (RLIMIT_NOFILE 64") == std::string::npos) {
      ::_exit(6);
    }
    auto next = ReadFrame(b.get());
    ::_exit(next.ok() && next->tag == Tag::kResult && next->payload == "next" ? 0 : 7);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // With room, the same frame brings both descriptors and no error.
  auto [c, d] = Pair();
  auto [p, q] = Pair();
  ASSERT_TRUE(WriteFrame(c.get(), Tag::kOpened, "carried", p.get(), q.get()).ok());
  auto frame = ReadFrame(d.get());
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_TRUE(frame->fd.valid() && frame->fd2.valid());
  EXPECT_FALSE(DescriptorsDropped(Status(ErrorCode::kIo, "reading a frame: EIO")));
}

TEST(Protocol, EofBeforeAFrameMeansThePeerIsGone) {
  auto [a, b] = Pair();
  a.Reset();
  auto frame = ReadFrame(b.get());
  EXPECT_EQ(frame.status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(WriteFrame(b.get(), Tag::kRun, "x").code(), ErrorCode::kUnavailable);
}

TEST(Protocol, TruncatedHeaderIsCorrupt) {
  auto [a, b] = Pair();
  RawWrite(a.get(), std::string("\x0b\x00\x00", 3));
  a.Reset();
  auto frame = ReadFrame(b.get());
  EXPECT_EQ(frame.status().code(), ErrorCode::kCorrupt);
}

TEST(Protocol, TruncatedPayloadIsCorruptAndNamesTheFrame) {
  auto [a, b] = Pair();
  RawWrite(a.get(), Header(static_cast<std::uint32_t>(Tag::kResult), 100) + "only ten b");
  a.Reset();
  auto frame = ReadFrame(b.get());
  EXPECT_EQ(frame.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(frame.status().message().find("RESULT"), std::string::npos);
  EXPECT_NE(frame.status().message().find("10 of 100"), std::string::npos);
}

TEST(Protocol, PeekTagNamesTheWaitingFrameAndReadsNothing) {
  auto [a, b] = Pair();
  EXPECT_EQ(PeekTag(b.get()), std::nullopt);  // nothing there yet
  RawWrite(a.get(), std::string("\x12\x00", 2));
  EXPECT_EQ(PeekTag(b.get()), std::nullopt);  // not a whole tag
  RawWrite(a.get(), std::string("\x00\x00", 2) + std::string(4, '\0'));
  EXPECT_EQ(PeekTag(b.get()), Tag::kRenewInPlace);
  EXPECT_EQ(PeekTag(b.get()), Tag::kRenewInPlace);  // still there
  auto frame = ReadFrame(b.get());
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_EQ(frame->tag, Tag::kRenewInPlace);
  a.Reset();
  EXPECT_EQ(PeekTag(b.get()), std::nullopt);  // hung up
}

TEST(Protocol, OversizedLengthIsRejectedBeforeAllocating) {
  for (std::uint32_t claimed : {kMaxFrameBytes + 1, 0x7fffffffu, 0xffffffffu}) {
    auto [a, b] = Pair();
    RawWrite(a.get(), Header(static_cast<std::uint32_t>(Tag::kResult), claimed));
    a.Reset();  // had the claim been taken, the read would end truncated
    auto frame = ReadFrame(b.get());
    EXPECT_EQ(frame.status().code(), ErrorCode::kCorrupt) << claimed;
    EXPECT_NE(frame.status().message().find("over the per-frame cap"), std::string::npos)
        << frame.status().message();
  }
}

// The cap once allowed a 2 GiB claim, which the host allocated before a
// byte of it arrived. Here the reader runs in a child whose address space
// is limited to what it uses plus 512 MiB: allocating the claim would abort
// it.
TEST(Protocol, AClaimedLengthIsNotAllocatedBeforeItsBytesArrive) {
  auto [a, b] = Pair();
  RawWrite(a.get(), Header(static_cast<std::uint32_t>(Tag::kCheckpointData), 0x7fffffffu) +
                        std::string(1000, 'x'));
  a.Reset();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;  // the address space in use
    rlimit limit{};
    limit.rlim_cur = limit.rlim_max =
        static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + (512u << 20);
    if (pages <= 0 || ::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(2);
    auto frame = ReadFrame(b.get());
    ::_exit(frame.status().code() == ErrorCode::kCorrupt ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(Protocol, AMessageOverTheFrameCapTravelsInPartsAndArrivesWhole) {
  auto [a, b] = Pair();
  auto [x, y] = Pair();
  std::string big(2 * kMaxFrameBytes + 12345, 'x');
  big[kMaxFrameBytes] = 'y';
  big.back() = 'z';
  std::thread writer([&, fd = a.get()] {
    ASSERT_TRUE(WriteFrame(fd, Tag::kCheckpointData, big, x.get()).ok());
    ASSERT_TRUE(WriteFrame(fd, Tag::kRetire, "").ok());
  });
  auto frame = ReadFrame(b.get());
  auto next = ReadFrame(b.get());
  writer.join();
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_EQ(frame->tag, Tag::kCheckpointData);
  EXPECT_TRUE(frame->payload == big);
  EXPECT_TRUE(frame->fd.valid());  // the descriptor rode with the first part
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->tag, Tag::kRetire);
}

TEST(Protocol, ALongMessageIsSentAsContinuedFramesOfTheCap) {
  auto [a, b] = Pair();
  std::string big(kMaxFrameBytes + 10, 'x');
  std::thread writer([&, fd = a.get()] { ASSERT_TRUE(WriteFrame(fd, Tag::kLoad, big).ok()); });
  // Read raw: CONTINUED with kMaxFrameBytes, then LOAD with the last 10.
  auto read_exactly = [fd = b.get()](std::size_t n) { return ReadExactly(fd, n); };
  // First its size, so the reader reserves it once.
  EXPECT_EQ(read_exactly(8), Header(static_cast<std::uint32_t>(Tag::kMessageSize), 8));
  PayloadWriter size;
  size.U64(big.size());
  EXPECT_EQ(read_exactly(8), size.data());
  EXPECT_EQ(read_exactly(8), Header(static_cast<std::uint32_t>(Tag::kContinued), kMaxFrameBytes));
  read_exactly(kMaxFrameBytes);
  EXPECT_EQ(read_exactly(8), Header(static_cast<std::uint32_t>(Tag::kLoad), 10));
  EXPECT_EQ(read_exactly(10), std::string(10, 'x'));
  writer.join();
}

TEST(Protocol, AMessageWrittenInPiecesArrivesAsTheirConcatenation) {
  // Pieces cut across the frame boundaries every way: shorter than what is
  // left of a frame, longer than a whole frame, empty, ending on a boundary.
  std::string a(10, 'a'), b(kMaxFrameBytes - 15, 'b'), c(kMaxFrameBytes + 7, 'c'), d(3, 'd');
  c[0] = 'C';
  c.back() = 'Z';
  const std::vector<std::vector<std::string_view>> cases = {
      {},
      {a},
      {a, "", d},
      {a, b, c, "", d},
      {b, std::string_view(a).substr(0, 5), std::string_view(c).substr(0, kMaxFrameBytes)},
  };
  for (const auto& parts : cases) {
    std::string whole;
    for (std::string_view part : parts) whole.append(part);
    auto [x, y] = Pair();
    std::thread writer([&, fd = x.get()] {
      ASSERT_TRUE(WriteFrameParts(fd, Tag::kCheckpointData, parts).ok());
      ASSERT_TRUE(WriteFrame(fd, Tag::kRetire, "").ok());
    });
    auto frame = ReadFrame(y.get());
    auto next = ReadFrame(y.get());
    writer.join();
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    EXPECT_EQ(frame->tag, Tag::kCheckpointData);
    EXPECT_EQ(frame->payload.size(), whole.size());
    EXPECT_TRUE(frame->payload == whole);
    ASSERT_TRUE(next.ok());
    EXPECT_EQ(next->tag, Tag::kRetire);
  }
}

TEST(Protocol, AMessageExactlyTwoFramesLongEndsWithAFullFrameOfItsOwnTag) {
  auto [x, y] = Pair();
  std::string half(kMaxFrameBytes, 'h');
  std::thread writer([&, fd = x.get()] {
    ASSERT_TRUE(WriteFrameParts(fd, Tag::kLoad, {half, half}).ok());
  });
  auto read_exactly = [fd = y.get()](std::size_t n) { return ReadExactly(fd, n); };
  EXPECT_EQ(read_exactly(8), Header(static_cast<std::uint32_t>(Tag::kMessageSize), 8));
  read_exactly(8);
  EXPECT_EQ(read_exactly(8), Header(static_cast<std::uint32_t>(Tag::kContinued), kMaxFrameBytes));
  read_exactly(kMaxFrameBytes);
  EXPECT_EQ(read_exactly(8), Header(static_cast<std::uint32_t>(Tag::kLoad), kMaxFrameBytes));
  read_exactly(kMaxFrameBytes);
  writer.join();
}

std::string MessageSize(std::uint64_t size) {
  PayloadWriter w;
  w.U32(static_cast<std::uint32_t>(Tag::kMessageSize)).U32(8).U64(size);
  return w.Take();
}

TEST(Protocol, AnAnnouncedSizeIsOnlyAClaim) {
  // Announced far larger than what comes: the message is what came.
  {
    auto [a, b] = Pair();
    RawWrite(a.get(), MessageSize(kMaxMessageBytes) +
                          Header(static_cast<std::uint32_t>(Tag::kContinued), 3) + "abc" +
                          Header(static_cast<std::uint32_t>(Tag::kRun), 2) + "de");
    auto frame = ReadFrame(b.get());
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    EXPECT_EQ(frame->tag, Tag::kRun);
    EXPECT_EQ(frame->payload, "abcde");
    EXPECT_LT(frame->payload.capacity(), std::size_t{1} << 20);  // the claim's room is not kept
  }
  // Announced smaller: it grows as it arrives.
  {
    auto [a, b] = Pair();
    RawWrite(a.get(), MessageSize(1) + Header(static_cast<std::uint32_t>(Tag::kRun), 4) + "wxyz");
    auto frame = ReadFrame(b.get());
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    EXPECT_EQ(frame->payload, "wxyz");
  }
}

TEST(Protocol, AMalformedAnnouncementIsCorrupt) {
  const std::string kContinued3 = Header(static_cast<std::uint32_t>(Tag::kContinued), 3) + "abc";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {MessageSize(kMaxMessageBytes + 1), "over the protocol cap"},
      {kContinued3 + MessageSize(10), "inside a message"},
      {MessageSize(10) + MessageSize(10), "inside a message"},
      {Header(static_cast<std::uint32_t>(Tag::kMessageSize), 4) + "abcd", "not of 8 bytes"},
      {Header(static_cast<std::uint32_t>(Tag::kMessageSize), 8) + "abc", "truncated"},
      {MessageSize(10), "truncated message"},  // and then the peer is gone
  };
  for (const auto& [bytes, says] : cases) {
    auto [a, b] = Pair();
    RawWrite(a.get(), bytes);
    a.Reset();
    auto frame = ReadFrame(b.get());
    EXPECT_EQ(frame.status().code(), ErrorCode::kCorrupt) << says;
    EXPECT_NE(frame.status().message().find(says), std::string::npos) << frame.status().message();
  }
}

TEST(Protocol, AMessageCutBetweenItsPartsIsCorrupt) {
  auto [a, b] = Pair();
  RawWrite(a.get(), Header(static_cast<std::uint32_t>(Tag::kContinued), 5) + "abcde");
  a.Reset();
  auto frame = ReadFrame(b.get());
  EXPECT_EQ(frame.status().code(), ErrorCode::kCorrupt);  // not "the peer is gone"
  EXPECT_NE(frame.status().message().find("after 5 bytes"), std::string::npos)
      << frame.status().message();
}

TEST(Protocol, DeadlineBoundsASilentPeer) {
  auto [a, b] = Pair();
  auto frame = ReadFrame(b.get(), Clock::now() + std::chrono::milliseconds(20));
  EXPECT_EQ(frame.status().code(), ErrorCode::kTimeout);
  // A frame that stops half-way also ends at the deadline.
  RawWrite(a.get(), Header(static_cast<std::uint32_t>(Tag::kRun), 50) + "abc");
  frame = ReadFrame(b.get(), Clock::now() + std::chrono::milliseconds(20));
  EXPECT_EQ(frame.status().code(), ErrorCode::kTimeout);
}

TEST(Protocol, ReadableAsksWithoutWaiting) {
  auto [a, b] = Pair();
  EXPECT_FALSE(Readable(b.get()));
  // A deadline that has already passed is a timeout, not a wait.
  EXPECT_EQ(WaitReadable(b.get(), Clock::now()).code(), ErrorCode::kTimeout);
  ASSERT_TRUE(WriteFrame(a.get(), Tag::kRetire, "").ok());
  EXPECT_TRUE(Readable(b.get()));
  EXPECT_TRUE(WaitReadable(b.get(), Clock::now() + std::chrono::seconds(5)).ok());
  ASSERT_TRUE(ReadFrame(b.get()).ok());
  EXPECT_FALSE(Readable(b.get()));
  a.Reset();  // a hang-up counts as readable: the next read says the peer is gone
  EXPECT_TRUE(Readable(b.get()));
}

// BufferedFrameReader (a cell's tool pipes): frames that came together are
// read one by one and pending() says one is there; a long message in parts
// arrives whole; EOF and truncation are the errors ReadFrame gives; a socket
// the peer made non-blocking is waited on.
TEST(BufferedFrameReader, ReadsFramesThatCameTogetherOneByOne) {
  auto [a, b] = Pair();
  ASSERT_TRUE(WriteFrame(a.get(), Tag::kToolCall, "first").ok());
  ASSERT_TRUE(WriteFrame(a.get(), Tag::kToolReply, "").ok());
  BufferedFrameReader reader;
  EXPECT_FALSE(reader.pending());
  auto first = reader.Read(b.get());
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->tag, Tag::kToolCall);
  EXPECT_EQ(first->payload, "first");
  EXPECT_TRUE(reader.pending());
  EXPECT_FALSE(Readable(b.get())) << "the rest is in the reader's buffer, not the socket";
  auto second = reader.Read(b.get());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->tag, Tag::kToolReply);
  EXPECT_TRUE(second->payload.empty());
  EXPECT_FALSE(reader.pending());
  ASSERT_TRUE(WriteFrame(a.get(), Tag::kToolCall, std::string(10000, 'z')).ok());  // over a chunk
  auto third = reader.Read(b.get());
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->payload, std::string(10000, 'z'));
  EXPECT_FALSE(reader.pending());
  a.Reset();
  auto gone = reader.Read(b.get());
  EXPECT_EQ(gone.status().code(), ErrorCode::kUnavailable);
}

TEST(BufferedFrameReader, ALongMessageInPartsArrivesWhole) {
  auto [a, b] = Pair();
  std::string big(kMaxFrameBytes + 100, 'x');
  big[kMaxFrameBytes + 7] = 'y';
  std::thread writer([&, fd = a.get()] { ASSERT_TRUE(WriteFrame(fd, Tag::kToolCall, big).ok()); });
  BufferedFrameReader reader;
  auto frame = reader.Read(b.get());
  writer.join();
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_EQ(frame->tag, Tag::kToolCall);
  EXPECT_EQ(frame->payload, big);
}

TEST(BufferedFrameReader, TruncationAndOversizedClaimsAreCorrupt) {
  {
    auto [a, b] = Pair();
    RawWrite(a.get(), Header(static_cast<std::uint32_t>(Tag::kToolCall), 50) + "abc");
    a.Reset();
    BufferedFrameReader reader;
    auto frame = reader.Read(b.get());
    EXPECT_EQ(frame.status().code(), ErrorCode::kCorrupt);
    EXPECT_NE(frame.status().message().find("TOOL_CALL"), std::string::npos);
  }
  {
    auto [a, b] = Pair();
    RawWrite(a.get(), Header(static_cast<std::uint32_t>(Tag::kToolCall), kMaxFrameBytes + 1));
    BufferedFrameReader reader;
    EXPECT_EQ(reader.Read(b.get()).status().code(), ErrorCode::kCorrupt);
  }
}

TEST(BufferedFrameReader, WaitsOnASocketThePeerMadeNonBlocking) {
  auto [a, b] = Pair();
  ASSERT_EQ(::fcntl(b.get(), F_SETFL, ::fcntl(b.get(), F_GETFL) | O_NONBLOCK), 0);
  std::thread writer([fd = a.get()] {
    // Whenever this runs, before or during the read: the reader waits for it.
    ASSERT_TRUE(WriteFrame(fd, Tag::kToolReply, "late").ok());
  });
  BufferedFrameReader reader;
  auto frame = reader.Read(b.get());
  writer.join();
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_EQ(frame->payload, "late");
}

TEST(WritePipeFrame, APipeWithoutAReaderIsUnavailableNotASignal) {
  // SIGPIPE at its default (whatever this process inherited): only the
  // write's own blocking keeps the process alive.
  struct sigaction deflt {}, before {};
  deflt.sa_handler = SIG_DFL;
  ASSERT_EQ(::sigaction(SIGPIPE, &deflt, &before), 0);
  EXPECT_FALSE(PipeSignalIgnored());
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd read_end(p[0]), write_end(p[1]);
  read_end.Reset();
  Status written = WritePipeFrame(write_end.get(), Tag::kToolCall, "x");
  EXPECT_EQ(written.code(), ErrorCode::kUnavailable) << written.ToString();
  {
    ScopedPipeSignalBlock block;
    EXPECT_TRUE(ScopedPipeSignalBlock::Active());
    written = WritePipeFrame(write_end.get(), Tag::kToolCall, "x", -1, /*ignored=*/true);
    EXPECT_EQ(written.code(), ErrorCode::kUnavailable) << written.ToString();
  }
  EXPECT_FALSE(ScopedPipeSignalBlock::Active());
  ASSERT_EQ(::sigaction(SIGPIPE, &before, nullptr), 0);
}

TEST(WritePipeFrame, AFullPipeWaitsOnlyUntilTheStop) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  UniqueFd read_end(p[0]), write_end(p[1]);
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  std::thread stopper([fd = stop.get()] {
    const std::uint64_t one = 1;
    ASSERT_EQ(::write(fd, &one, sizeof one), static_cast<ssize_t>(sizeof one));
  });
  // Far over a pipe's room, and nobody reads.
  Status written = WritePipeFrame(write_end.get(), Tag::kToolReply, std::string(4 << 20, 'r'),
                                  stop.get());
  stopper.join();
  EXPECT_EQ(written.code(), ErrorCode::kUnavailable) << written.ToString();
}

TEST(BufferedFrameReader, HalfAFrameOnANonBlockingPipeWaitsOnlyUntilTheStop) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  UniqueFd read_end(p[0]), write_end(p[1]);
  // A TOOL_CALL header claiming 100 bytes, and 10 of them; the writer stays.
  const char half[] = {28, 0, 0, 0, 100, 0, 0, 0, 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x'};
  ASSERT_EQ(::write(write_end.get(), half, sizeof half), static_cast<ssize_t>(sizeof half));
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  std::thread stopper([fd = stop.get()] {
    const std::uint64_t one = 1;
    ASSERT_EQ(::write(fd, &one, sizeof one), static_cast<ssize_t>(sizeof one));
  });
  BufferedFrameReader reader;
  auto frame = reader.Read(read_end.get(), stop.get());
  stopper.join();
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), ErrorCode::kUnavailable) << frame.status().ToString();
}

TEST(Payload, RoundTripsEveryType) {
  PayloadWriter w;
  w.U8(7).U32(0xdeadbeef).I32(-5).U64(1ull << 40).F64(2.5).Str("abc");
  w.Strs({"x", "", "zz"}).OptStr(std::nullopt).OptStr("v");
  PayloadReader r(w.data());
  EXPECT_EQ(r.U8(), 7);
  EXPECT_EQ(r.U32(), 0xdeadbeefu);
  EXPECT_EQ(r.I32(), -5);
  EXPECT_EQ(r.U64(), 1ull << 40);
  EXPECT_EQ(r.F64(), 2.5);
  EXPECT_EQ(r.Str(), "abc");
  EXPECT_EQ(r.Strs(), (std::vector<std::string>{"x", "", "zz"}));
  EXPECT_EQ(r.OptStr(), std::nullopt);
  EXPECT_EQ(r.OptStr(), "v");
  EXPECT_TRUE(r.Finish("test").ok());
}

TEST(Payload, ShortOrTrailingPayloadsAreCorrupt) {
  PayloadWriter w;
  w.Str("abcdef");
  std::string cut = w.data().substr(0, 6);
  PayloadReader short_reader(cut);
  short_reader.Str();
  EXPECT_EQ(short_reader.Finish("X").code(), ErrorCode::kCorrupt);
  PayloadReader trailing(w.data() + "!");
  trailing.Str();
  EXPECT_EQ(trailing.Finish("X").code(), ErrorCode::kCorrupt);
  // A huge declared count must not allocate or loop.
  PayloadWriter counts;
  counts.U32(0x7fffffff);
  PayloadReader huge(counts.data());
  EXPECT_TRUE(huge.Strs().empty());
  EXPECT_EQ(huge.Finish("X").code(), ErrorCode::kCorrupt);
}

TEST(Payload, ResultRoundTrip) {
  Result in;
  in.ok = false;
  in.value = "v";
  in.stdout_text = "out";
  in.error = "err";
  in.exit_code = 124;
  in.held = {"a", "b"};
  in.dropped = {"s"};
  in.images = {std::string("\x89PNG\r\n\x1a\n\0", 9), "second"};
  PayloadWriter w;
  WriteResult(w, in);
  PayloadReader r(w.data());
  Result out = ReadResult(r);
  ASSERT_TRUE(r.Finish("RESULT").ok());
  EXPECT_EQ(out.ok, in.ok);
  EXPECT_EQ(out.value, in.value);
  EXPECT_EQ(out.stdout_text, in.stdout_text);
  EXPECT_EQ(out.error, in.error);
  EXPECT_EQ(out.exit_code, in.exit_code);
  EXPECT_EQ(out.held, in.held);
  EXPECT_EQ(out.dropped, in.dropped);
  EXPECT_EQ(out.images, in.images) << "PNG bytes, NULs included";
}

}  // namespace
}  // namespace dolsot::protocol
