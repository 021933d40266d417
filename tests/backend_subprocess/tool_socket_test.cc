// A cell's tool socket (tool_socket.h) between ToolChannel (the session's
// end) and ToolSocketHost (the host's): the first call opens it and goes on
// it, later ones too while none waits there; a call made while one waits
// goes on the runner's socket; the host shutting the socket down or the
// cell ending fails the call waiting on it and nothing hangs; a host that
// serves no tool socket gets every call on the runner's socket; only an
// AF_UNIX stream socket is taken for one.
#include "backend_subprocess/tool_socket.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

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

// The TOOL_SOCKET frame the first call sends on the runner's socket: the host's end.
UniqueFd AcceptToolSocket(int runner) {
  auto frame = protocol::ReadFrame(runner);
  EXPECT_TRUE(frame.ok());
  if (!frame.ok()) return UniqueFd();
  EXPECT_EQ(frame->tag, Tag::kToolSocket);
  EXPECT_TRUE(frame->fd.valid());
  EXPECT_TRUE(IsToolSocket(frame->fd.get()));
  return std::move(frame->fd);
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

TEST(ToolSocket, CallsGoOnTheCellsOwnSocketAndTheHostRunsThem) {
  Runner runner;
  ToolChannel channel;
  channel.BeginCell(runner.session.get(), /*tool_socket=*/true);
  auto first = CallAsync(channel, "search", "args-1");
  ToolSocketHost host(AcceptToolSocket(runner.host.get()));
  auto call = host.Receive();
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->name, "search");
  EXPECT_EQ(call->arguments, "args-1");
  ASSERT_TRUE(host.Reply(ToolReply{true, "value-1"}));
  EXPECT_FALSE(host.Reply(ToolReply{true, "twice"}));  // one reply per call
  ExpectAnswer(first, true, "value-1");

  // The next call takes the same socket; nothing more on the runner's.
  auto second = CallAsync(channel, "search", "args-2");
  call = host.Receive();
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->arguments, "args-2");
  ASSERT_TRUE(host.Reply(ToolReply{false, "error"}));
  ExpectAnswer(second, false, "error");
  EXPECT_FALSE(protocol::Readable(runner.host.get()));

  // The cell ends: the session closes its end, and the host's Receive ends.
  channel.EndCell();
  EXPECT_FALSE(host.Receive().has_value());
}

TEST(ToolSocket, ACallMadeWhileOneWaitsThereGoesOnTheRunnersSocket) {
  Runner runner;
  ToolChannel channel;
  channel.BeginCell(runner.session.get(), true);
  auto slow = CallAsync(channel, "slow", "a");
  ToolSocketHost host(AcceptToolSocket(runner.host.get()));
  auto call = host.Receive();
  ASSERT_TRUE(call.has_value());
  // "slow" waits on the tool socket: the next call comes on the runner's.
  auto quick = CallAsync(channel, "quick", "b");
  AnswerOnTheRunnersSocket(runner.host.get(), "quick", "q");
  ExpectAnswer(quick, true, "q");
  ASSERT_TRUE(host.Reply(ToolReply{true, "s"}));
  ExpectAnswer(slow, true, "s");
  channel.EndCell();
}

TEST(ToolSocket, TheHostShuttingItDownFailsTheWaitingCallAndLaterOnesUseTheRunnersSocket) {
  Runner runner;
  ToolChannel channel;
  channel.BeginCell(runner.session.get(), true);
  auto waiting = CallAsync(channel, "t", "a");
  UniqueFd end = AcceptToolSocket(runner.host.get());
  ToolSocketHost host(UniqueFd(::dup(end.get())));
  ASSERT_TRUE(host.Receive().has_value());
  ::shutdown(end.get(), SHUT_RDWR);
  auto reply = waiting.get();
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.status().message().find("tool socket"), std::string::npos)
      << reply.status().ToString();
  EXPECT_FALSE(host.Reply(ToolReply{true, "late"}));  // dropped, and no signal kills us

  auto next = CallAsync(channel, "t", "b");
  AnswerOnTheRunnersSocket(runner.host.get(), "t", "m");
  ExpectAnswer(next, true, "m");
  channel.EndCell();
}

TEST(ToolSocket, TheCellEndingFailsTheCallWaitingThere) {
  Runner runner;
  ToolChannel channel;
  channel.BeginCell(runner.session.get(), true);
  auto waiting = CallAsync(channel, "t", "a");
  ToolSocketHost host(AcceptToolSocket(runner.host.get()));
  ASSERT_TRUE(host.Receive().has_value());
  channel.EndCell();
  auto reply = waiting.get();
  EXPECT_FALSE(reply.ok());
  EXPECT_FALSE(host.Reply(ToolReply{true, "late"}));
  EXPECT_FALSE(host.Receive().has_value());
  // And a call after the cell is refused.
  EXPECT_FALSE(channel.Call("t", "b").ok());
}

TEST(ToolSocket, WithoutOneEveryCallGoesOnTheRunnersSocket) {
  Runner runner;
  ToolChannel channel;
  channel.BeginCell(runner.session.get(), false);
  auto call = CallAsync(channel, "t", "a");
  AnswerOnTheRunnersSocket(runner.host.get(), "t", "v");
  ExpectAnswer(call, true, "v");
  channel.EndCell();
}

TEST(ToolSocket, OnlyAnAfUnixStreamSocketIsTaken) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd read_end(p[0]), write_end(p[1]);
  EXPECT_FALSE(IsToolSocket(read_end.get()));
  int d[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, d), 0);
  UniqueFd d0(d[0]), d1(d[1]);
  EXPECT_FALSE(IsToolSocket(d0.get()));
  Runner runner;
  EXPECT_TRUE(IsToolSocket(runner.host.get()));
}

TEST(ToolSocket, AFrameThatIsNotAToolCallEndsTheHostsReceive) {
  Runner runner;
  ASSERT_TRUE(protocol::WriteFrame(runner.session.get(), Tag::kToolCall, "short").ok());
  ToolSocketHost host(std::move(runner.host));
  EXPECT_FALSE(host.Receive().has_value());
  EXPECT_FALSE(host.Reply(ToolReply{true, "x"}));  // no call to answer
}

}  // namespace
}  // namespace dolsot
