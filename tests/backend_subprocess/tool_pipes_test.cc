// A cell's tool pipes (tool_pipes.h) between ToolChannel (the session's end)
// and ToolPipesHost (the host's): the first call opens them and goes there,
// later ones too while none waits there; a call made while one waits goes on
// the runner's socket; the host ending or the cell ending fails the call
// waiting there and nothing hangs; a host that serves no tool pipes gets
// every call on the runner's socket; only a pipe's read end and a pipe's
// write end are taken. And a hostile cell (it holds every end): garbage, a
// partial frame, a huge length, replies never read, a description made
// blocking: each ends the host's wait at the stop, never later.
#include "backend_subprocess/tool_pipes.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <optional>
#include <string>

#include "backend_subprocess/protocol.h"
#include "backend_subprocess/tool_channel.h"

namespace dolsot {
namespace {

using protocol::Tag;

struct Runner {
  UniqueFd host;     // the host's end of the runner's socket
  UniqueFd session;  // the session's
  Runner() {
    auto pair = protocol::SocketPair();
    EXPECT_TRUE(pair.ok());
    host = std::move(pair->first);
    session = std::move(pair->second);
  }
};

UniqueFd NewStop() { return UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)); }

void Stop(int stop) {
  const std::uint64_t one = 1;
  ASSERT_EQ(::write(stop, &one, sizeof one), static_cast<ssize_t>(sizeof one));
}

std::future<StatusOr<ToolReply>> CallAsync(ToolChannel& channel, std::string name,
                                           std::string arguments) {
  return std::async(std::launch::async, [&channel, name, arguments] {
    return channel.Call(name, arguments);
  });
}

// The call's reply came, as `ok` with `payload`.
void ExpectAnswer(std::future<StatusOr<ToolReply>>& call, bool ok, const std::string& payload) {
  auto reply = call.get();
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->ok, ok);
  EXPECT_EQ(reply->payload, payload);
}

// The TOOL_PIPES frame the first call sends on the runner's socket: the
// host's ends, accepted.
HostToolPipes AcceptFromRunner(int runner) {
  auto frame = protocol::ReadFrame(runner);
  EXPECT_TRUE(frame.ok());
  if (!frame.ok()) return {};
  EXPECT_EQ(frame->tag, Tag::kToolPipes);
  auto pipes = AcceptToolPipes(std::move(frame->fd), std::move(frame->fd2));
  EXPECT_TRUE(pipes.ok()) << pipes.status().ToString();
  if (!pipes.ok()) return {};
  return std::move(pipes).value();
}

// Reads the next TOOL_CALL on the runner's socket, which must name `tool`,
// and answers it there with `value`.
void AnswerOnTheRunnersSocket(int runner, const std::string& tool, const std::string& value) {
  auto frame = protocol::ReadFrame(runner);
  ASSERT_TRUE(frame.ok());
  ASSERT_EQ(frame->tag, Tag::kToolCall);
  EXPECT_FALSE(frame->fd.valid());
  auto message = protocol::ReadToolCall(frame->payload);
  ASSERT_TRUE(message.ok());
  EXPECT_EQ(message->call.name, tool);
  ASSERT_TRUE(protocol::WriteFrame(runner, Tag::kToolReply,
                                   protocol::ToolReplyPayload(message->id, ToolReply{true, value}))
                  .ok());
}

// A pipe, both ends as the session would hold them (blocking).
struct Pipe {
  UniqueFd read, write;
  Pipe() {
    int p[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    read = UniqueFd(p[0]);
    write = UniqueFd(p[1]);
  }
};

UniqueFd Dup(int fd) { return UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)); }

// A host serving pipes the test holds every other end of, as a hostile cell
// would.
struct HostileCell {
  Pipe calls, replies;
  UniqueFd stop = NewStop();
  std::optional<ToolPipesHost> host;
  HostileCell() {
    auto pipes = AcceptToolPipes(Dup(calls.read.get()), Dup(replies.write.get()));
    EXPECT_TRUE(pipes.ok()) << pipes.status().ToString();
    host.emplace(std::move(pipes).value(), Dup(stop.get()));
  }
  void Write(std::string_view bytes) {
    ASSERT_EQ(::write(calls.write.get(), bytes.data(), bytes.size()),
              static_cast<ssize_t>(bytes.size()));
  }
};

std::string Header(Tag tag, std::uint32_t length) {
  std::string h(8, '\0');
  const auto t = static_cast<std::uint32_t>(tag);
  for (int i = 0; i < 4; ++i) {
    h[i] = static_cast<char>((t >> (8 * i)) & 0xff);
    h[4 + i] = static_cast<char>((length >> (8 * i)) & 0xff);
  }
  return h;
}

std::string CallFrame(std::uint64_t id, const std::string& name, const std::string& arguments) {
  const std::string payload = protocol::ToolCallPayload(id, name, arguments);
  return Header(Tag::kToolCall, static_cast<std::uint32_t>(payload.size())) + payload;
}

// A cell that may call tools over pipes of its own, its channel open.
struct PipesCell {
  Runner runner;
  ToolChannel channel;
  PipesCell() { channel.BeginCell(runner.session.get(), /*tool_pipes=*/true); }
  // The host's ends, once the first call sent them.
  HostToolPipes Accept() { return AcceptFromRunner(runner.host.get()); }
};

// The channel's next call comes on the runner's socket and is answered; the
// cell then ends.
void ExpectTheNextCallOnTheRunnersSocket(ToolChannel& channel, int runner) {
  auto next = CallAsync(channel, "t", "b");
  AnswerOnTheRunnersSocket(runner, "t", "m");
  ExpectAnswer(next, true, "m");
  channel.EndCell();
}

TEST(ToolPipes, CallsGoOnTheCellsOwnPipesAndTheHostRunsThem) {
  PipesCell cell;
  Runner& runner = cell.runner;
  ToolChannel& channel = cell.channel;
  auto first = CallAsync(channel, "search", "args-1");
  ToolPipesHost host(cell.Accept(), NewStop());
  auto call = host.Receive();
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->name, "search");
  EXPECT_EQ(call->arguments, "args-1");
  ASSERT_TRUE(host.Reply(ToolReply{true, "value-1"}));
  EXPECT_FALSE(host.Reply(ToolReply{true, "twice"}));  // one reply per call
  ExpectAnswer(first, true, "value-1");

  // The next call takes the same pipes; nothing more on the runner's socket.
  auto second = CallAsync(channel, "search", "args-2");
  call = host.Receive();
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->arguments, "args-2");
  ASSERT_TRUE(host.Reply(ToolReply{false, "error"}));
  ExpectAnswer(second, false, "error");
  EXPECT_FALSE(protocol::Readable(runner.host.get()));

  // The cell ends: the session closes its ends, and the host's Receive ends.
  channel.EndCell();
  EXPECT_FALSE(host.Receive().has_value());
}

TEST(ToolPipes, CallsAndRepliesLargerThanAPipeCrossWhole) {
  PipesCell cell;
  ToolChannel& channel = cell.channel;
  const std::string big(1 << 20, 'a');  // over PIPE_BUF and over a pipe's capacity
  auto first = CallAsync(channel, "t", big);
  ToolPipesHost host(cell.Accept(), NewStop());
  auto call = host.Receive();
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->arguments, big);
  const std::string answer(3 << 20, 'r');
  ASSERT_TRUE(host.Reply(ToolReply{true, answer}));
  ExpectAnswer(first, true, answer);
  channel.EndCell();
}

TEST(ToolPipes, ACallMadeWhileOneWaitsThereGoesOnTheRunnersSocket) {
  PipesCell cell;
  Runner& runner = cell.runner;
  ToolChannel& channel = cell.channel;
  auto slow = CallAsync(channel, "slow", "a");
  ToolPipesHost host(cell.Accept(), NewStop());
  auto call = host.Receive();
  ASSERT_TRUE(call.has_value());
  // "slow" waits on the tool pipes: the next call comes on the runner's socket.
  auto quick = CallAsync(channel, "quick", "b");
  AnswerOnTheRunnersSocket(runner.host.get(), "quick", "q");
  ExpectAnswer(quick, true, "q");
  ASSERT_TRUE(host.Reply(ToolReply{true, "s"}));
  ExpectAnswer(slow, true, "s");
  channel.EndCell();
}

TEST(ToolPipes, TheHostGoingAwayFailsTheWaitingCallAndLaterOnesUseTheRunnersSocket) {
  PipesCell cell;
  Runner& runner = cell.runner;
  ToolChannel& channel = cell.channel;
  auto waiting = CallAsync(channel, "t", "a");
  {
    ToolPipesHost host(cell.Accept(), NewStop());
    ASSERT_TRUE(host.Receive().has_value());
  }  // its ends close
  auto reply = waiting.get();
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.status().message().find("tool pipes"), std::string::npos)
      << reply.status().ToString();
  ExpectTheNextCallOnTheRunnersSocket(channel, runner.host.get());
}

TEST(ToolPipes, ACallThatCannotBeWrittenThereTakesTheRunnersSocket) {
  PipesCell cell;
  Runner& runner = cell.runner;
  ToolChannel& channel = cell.channel;
  auto first = CallAsync(channel, "t", "a");
  {
    ToolPipesHost host(cell.Accept(), NewStop());
    ASSERT_TRUE(host.Receive().has_value());
    ASSERT_TRUE(host.Reply(ToolReply{true, "1"}));
    ExpectAnswer(first, true, "1");
  }  // the host's ends close: the next write there meets no reader (no SIGPIPE here)
  ExpectTheNextCallOnTheRunnersSocket(channel, runner.host.get());
}

TEST(ToolPipes, TheCellEndingFailsTheCallWaitingThere) {
  PipesCell cell;
  ToolChannel& channel = cell.channel;
  auto waiting = CallAsync(channel, "t", "a");
  ToolPipesHost host(cell.Accept(), NewStop());
  ASSERT_TRUE(host.Receive().has_value());
  channel.EndCell();
  auto reply = waiting.get();
  EXPECT_FALSE(reply.ok());
  EXPECT_FALSE(host.Reply(ToolReply{true, "late"}));  // no reader: dropped, no SIGPIPE
  EXPECT_FALSE(host.Receive().has_value());
  // And a call after the cell is refused.
  EXPECT_FALSE(channel.Call("t", "b").ok());
}

TEST(ToolPipes, WithoutThemEveryCallGoesOnTheRunnersSocket) {
  Runner runner;
  ToolChannel channel;
  channel.BeginCell(runner.session.get(), false);
  auto call = CallAsync(channel, "t", "a");
  AnswerOnTheRunnersSocket(runner.host.get(), "t", "v");
  ExpectAnswer(call, true, "v");
  channel.EndCell();
}

TEST(ToolPipes, OnlyAPipesReadEndAndAPipesWriteEndAreTaken) {
  Pipe a, b;
  Runner runner;
  auto refused = [](UniqueFd calls, UniqueFd replies, const char* words) {
    auto pipes = AcceptToolPipes(std::move(calls), std::move(replies));
    ASSERT_FALSE(pipes.ok());
    EXPECT_EQ(pipes.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(pipes.status().message().find(words), std::string::npos)
        << pipes.status().ToString();
  };
  refused(Dup(runner.host.get()), Dup(b.write.get()), "call pipe is not a pipe");
  refused(Dup(a.read.get()), Dup(runner.host.get()), "reply pipe is not a pipe");
  refused(Dup(a.write.get()), Dup(b.write.get()), "call pipe is not open for reading");
  refused(Dup(a.read.get()), Dup(b.read.get()), "reply pipe is not open for writing");
  refused(UniqueFd(), Dup(b.write.get()), "call pipe is not a pipe");
  auto pipes = AcceptToolPipes(Dup(a.read.get()), Dup(b.write.get()));
  ASSERT_TRUE(pipes.ok()) << pipes.status().ToString();
  EXPECT_NE(::fcntl(pipes->calls.get(), F_GETFL) & O_NONBLOCK, 0);
  EXPECT_NE(::fcntl(pipes->replies.get(), F_GETFL) & O_NONBLOCK, 0);
  // Descriptions of the host's own: the sender's stay as they were.
  EXPECT_EQ(::fcntl(a.read.get(), F_GETFL) & O_NONBLOCK, 0);
  EXPECT_EQ(::fcntl(b.write.get(), F_GETFL) & O_NONBLOCK, 0);
}

TEST(ToolPipes, GarbageEndsTheHostsReceive) {
  HostileCell cell;
  cell.Write("this is not a frame at all, just bytes");
  EXPECT_FALSE(cell.host->Receive().has_value());
  EXPECT_FALSE(cell.host->Reply(ToolReply{true, "x"}));  // no call to answer
  EXPECT_FALSE(cell.host->Receive().has_value());        // and nothing is read after
}

TEST(ToolPipes, AFrameThatIsNotAToolCallEndsTheHostsReceive) {
  HostileCell cell;
  cell.Write(Header(Tag::kToolCall, 5) + "short");
  EXPECT_FALSE(cell.host->Receive().has_value());
}

TEST(ToolPipes, AHugeClaimedLengthEndsTheHostsReceiveAtOnce) {
  HostileCell cell;
  cell.Write(Header(Tag::kToolCall, 0xfffffff0u));
  EXPECT_FALSE(cell.host->Receive().has_value());
}

TEST(ToolPipes, InterleavedFramesEndTheHostsReceive) {
  // Two threads' frames written without the channel's lock: one frame's
  // bytes land inside the other's.
  HostileCell cell;
  const std::string a = CallFrame(1, "first", std::string(100, 'a'));
  const std::string b = CallFrame(2, "second", std::string(100, 'b'));
  cell.Write(a.substr(0, 20) + b + a.substr(20));
  cell.calls.write.Reset();
  int calls = 0;
  while (cell.host->Receive().has_value()) {
    ++calls;
    ASSERT_LT(calls, 3);  // never more calls than frames written
  }
  EXPECT_FALSE(cell.host->Receive().has_value());
}

TEST(ToolPipes, APartialFrameHoldsTheHostOnlyUntilTheStop) {
  HostileCell cell;
  cell.Write(CallFrame(1, "t", std::string(1000, 'x')).substr(0, 200));  // and never the rest
  auto received = std::async(std::launch::async, [&] { return cell.host->Receive(); });
  Stop(cell.stop.get());
  EXPECT_FALSE(received.get().has_value());
}

TEST(ToolPipes, AnIdleHostEndsAtTheStop) {
  HostileCell cell;
  auto received = std::async(std::launch::async, [&] { return cell.host->Receive(); });
  Stop(cell.stop.get());
  EXPECT_FALSE(received.get().has_value());
}

TEST(ToolPipes, ACellThatNeverReadsItsRepliesHoldsTheHostOnlyUntilTheStop) {
  HostileCell cell;
  // The cell makes its description of the reply pipe blocking: the host's own stays not.
  ASSERT_EQ(::fcntl(cell.replies.write.get(), F_SETFL, 0), 0);
  cell.Write(CallFrame(1, "t", "a"));
  ASSERT_TRUE(cell.host->Receive().has_value());
  auto replied = std::async(std::launch::async, [&] {
    return cell.host->Reply(ToolReply{true, std::string(4 << 20, 'r')});  // far over a pipe's room
  });
  Stop(cell.stop.get());
  EXPECT_FALSE(replied.get());
  EXPECT_FALSE(cell.host->Receive().has_value());
}

TEST(ToolPipes, ACellThatTakesTheBytesFirstLeavesTheHostWaitingOnlyUntilTheStop) {
  HostileCell cell;
  // The cell reads its own call back from the call pipe before the host does.
  cell.Write(CallFrame(1, "t", "a"));
  char buffer[256];
  ASSERT_GT(::read(cell.calls.read.get(), buffer, sizeof buffer), 0);
  auto received = std::async(std::launch::async, [&] { return cell.host->Receive(); });
  Stop(cell.stop.get());
  EXPECT_FALSE(received.get().has_value());
}

}  // namespace
}  // namespace dolsot
