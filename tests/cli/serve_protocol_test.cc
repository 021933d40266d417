// The server's wire protocol: base64, frames (bounds, EOF, bad lengths),
// request and reply encoding both ways, bad messages as errors.
#include "cli/serve_protocol.h"

#include "cli/base64.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/unique_fd.h"

namespace dolsot::cli {
namespace {

struct SocketPair {
  UniqueFd a, b;
  SocketPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a = UniqueFd(fds[0]);
    b = UniqueFd(fds[1]);
  }
};

TEST(ServeBase64, RoundTripsEveryByteAndEveryPadding) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (std::size_t n = 0; n <= all.size(); n += 1) {
    const std::string bytes = all.substr(0, n);
    auto back = Base64Decode(Base64Encode(bytes));
    ASSERT_TRUE(back.has_value()) << n;
    EXPECT_EQ(*back, bytes);
  }
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
}

TEST(ServeBase64, RefusesWhatIsNotCanonicalBase64) {
  for (const char* bad : {"Zm9", "Zm9v!mFy", "Z===", "Zm=v", "Zm9=Zm9v", "Zm9vYmF=x", "Zh=="}) {
    EXPECT_FALSE(Base64Decode(bad).has_value()) << bad;
  }
}

TEST(ServeFrames, RoundTripAndEof) {
  SocketPair pair;
  ASSERT_TRUE(WriteFrame(pair.a.get(), "hello", 100).ok());
  ASSERT_TRUE(WriteFrame(pair.a.get(), "", 100).ok());
  auto first = ReadFrame(pair.b.get(), 100, std::nullopt);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, "hello");
  auto empty = ReadFrame(pair.b.get(), 100, std::nullopt);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
  pair.a.Reset();
  auto closed = ReadFrame(pair.b.get(), 100, std::nullopt);
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.status().code(), ErrorCode::kUnavailable);
}

TEST(ServeFrames, OversizedTruncatedAndSilentFramesAreErrors) {
  {
    SocketPair pair;
    EXPECT_EQ(WriteFrame(pair.a.get(), std::string(11, 'x'), 10).code(),
              ErrorCode::kInvalidArgument);
    ASSERT_TRUE(WriteFrame(pair.a.get(), std::string(11, 'x'), 100).ok());
    auto big = ReadFrame(pair.b.get(), 10, std::nullopt);
    ASSERT_FALSE(big.ok());
    EXPECT_EQ(big.status().code(), ErrorCode::kCorrupt);
    EXPECT_NE(big.status().message().find("over the limit"), std::string::npos);
  }
  {
    SocketPair pair;  // a length of 0xffffffff: refused before any allocation
    const unsigned char header[4] = {0xff, 0xff, 0xff, 0xff};
    ASSERT_EQ(::write(pair.a.get(), header, 4), 4);
    auto huge = ReadFrame(pair.b.get(), kMaxRequestFrame, std::nullopt);
    ASSERT_FALSE(huge.ok());
    EXPECT_EQ(huge.status().code(), ErrorCode::kCorrupt);
  }
  {
    SocketPair pair;  // EOF inside a frame
    const unsigned char partial[6] = {0, 0, 0, 9, 'a', 'b'};
    ASSERT_EQ(::write(pair.a.get(), partial, 6), 6);
    pair.a.Reset();
    auto truncated = ReadFrame(pair.b.get(), 100, std::nullopt);
    ASSERT_FALSE(truncated.ok());
    EXPECT_EQ(truncated.status().code(), ErrorCode::kCorrupt);
  }
  {
    SocketPair pair;  // nothing arrives: the deadline ends the wait
    auto silent = ReadFrame(pair.b.get(), 100,
                            std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
    ASSERT_FALSE(silent.ok());
    EXPECT_EQ(silent.status().code(), ErrorCode::kTimeout);
  }
  {
    SocketPair pair;  // the wait callback can end the read
    int calls = 0;
    auto stopped = ReadFrame(pair.b.get(), 100, std::nullopt, [&]() -> Status {
      return ++calls == 2 ? Status(ErrorCode::kUnavailable, "stop") : Status::Ok();
    });
    ASSERT_FALSE(stopped.ok());
    EXPECT_EQ(stopped.status().message(), "stop");
    EXPECT_EQ(calls, 2);
  }
  {
    SocketPair pair;  // a peer that is gone: an error, not SIGPIPE
    pair.b.Reset();
    EXPECT_EQ(WriteFrame(pair.a.get(), "x", 10).code(), ErrorCode::kUnavailable);
  }
}

TEST(ServeMessages, ARunRequestRoundTripsWithArbitraryBytes) {
  ServeRequest request;
  request.type = RequestType::kRun;
  request.json = true;
  request.cwd = "/tmp/d\xff" "ir";
  request.env = {"A=1", "B=\xc3(", "EMPTY="};
  request.run.session = "s-1";
  request.run.code = std::string("print('\xff')\0x", 13);
  request.run.toolbox_specs = {"mytools:mt", "x:y"};
  request.run.timeout_seconds = 2.5;
  request.run.gate = true;
  request.run.max_repr = 10;
  auto back = DecodeRequest(EncodeRequest(request));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->type, RequestType::kRun);
  EXPECT_TRUE(back->json);
  EXPECT_EQ(back->cwd, request.cwd);
  EXPECT_EQ(back->env, request.env);
  EXPECT_EQ(back->run.session, request.run.session);
  EXPECT_EQ(back->run.code, request.run.code);
  EXPECT_EQ(back->run.toolbox_specs, request.run.toolbox_specs);
  EXPECT_EQ(back->run.timeout_seconds, 2.5);
  EXPECT_TRUE(back->run.gate);
  EXPECT_EQ(back->run.max_repr, 10);
  EXPECT_FALSE(back->run.max_text.has_value());
  // No sandbox travels as a resolved "none": the server reads no flag and
  // none of its own environment for it.
  EXPECT_TRUE(back->run.sandbox.resolved);
  EXPECT_FALSE(back->run.sandbox.policy.has_value());
}

// Every field of a policy, none at its default, to catch one dropped on the way.
SandboxPolicy UnusualPolicy() {
  SandboxPolicy policy;
  policy.network = true;
  policy.mounts = {{"/data", "/srv/d\xff", MountMode::kReadOnly}, {"/out", "/tmp/o", MountMode::kReadWrite}};
  policy.env = {{"A", "1"}, {"B", "\xc3("}};
  policy.memory_mb = 65;
  policy.processes = 9;
  policy.open_files = 66;
  policy.file_size_mb = 4;
  policy.disk_mb = 5;
  policy.cpu_seconds = 6;
  policy.best_effort = true;
  return policy;
}

TEST(ServeMessages, ASandboxPolicyTravelsWholeAndValidated) {
  ServeRequest request;
  request.type = RequestType::kRun;
  request.cwd = "/";
  request.run.session = "s";
  request.run.code = "1";
  request.run.sandbox.policy = UnusualPolicy();
  auto back = DecodeRequest(EncodeRequest(request));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->run.sandbox.resolved);
  ASSERT_TRUE(back->run.sandbox.policy.has_value());
  EXPECT_EQ(*back->run.sandbox.policy, UnusualPolicy());
  auto text = DecodeSandboxPolicy(EncodeSandboxPolicy(UnusualPolicy()));
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(**text, UnusualPolicy());
  auto none = DecodeSandboxPolicy(EncodeSandboxPolicy(std::nullopt));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  // What the server would not run: a relative mount, a mount at /proc.
  for (const SandboxMount& bad : {SandboxMount{"/x", "relative", MountMode::kReadOnly},
                                  SandboxMount{"/proc/x", "/tmp", MountMode::kReadOnly}}) {
    request.run.sandbox.policy->mounts = {bad};
    auto refused = DecodeRequest(EncodeRequest(request));
    ASSERT_FALSE(refused.ok()) << bad.virtual_path;
    EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  }
}

TEST(ServeMessages, OtherRequestsAndRepliesRoundTrip) {
  ServeRequest reset;
  reset.type = RequestType::kReset;
  reset.cwd = "/";
  reset.target = "all";
  auto back = DecodeRequest(EncodeRequest(reset));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->type, RequestType::kReset);
  EXPECT_EQ(back->target, "all");
  for (RequestType type : {RequestType::kInterrupt, RequestType::kStatus, RequestType::kStop}) {
    ServeRequest r;
    r.type = type;
    auto decoded = DecodeRequest(EncodeRequest(r));
    ASSERT_TRUE(decoded.ok()) << RequestTypeName(type);
    EXPECT_EQ(decoded->type, type);
  }
  ServeReply output;
  output.out = std::string("a\0\xff", 3);
  output.err = "dolsot: error: x\n";
  output.exit_code = 124;
  auto reply = DecodeReply(EncodeReply(output));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->out, output.out);
  EXPECT_EQ(reply->err, output.err);
  EXPECT_EQ(reply->exit_code, 124);
  ServeReply status;
  status.type = ReplyType::kStatus;
  status.status.pid = 42;
  status.status.live_sessions = {"a", "b"};
  status.status.socket = "/s";
  auto status_back = DecodeReply(EncodeReply(status));
  ASSERT_TRUE(status_back.ok()) << status_back.status().ToString();
  EXPECT_EQ(status_back->status.pid, 42);
  EXPECT_EQ(status_back->status.live_sessions, status.status.live_sessions);
  EXPECT_EQ(status_back->status.socket, "/s");
}

TEST(ServeMessages, NamesAndJsonLinesRoundTrip) {
  ServeRequest names;
  names.type = RequestType::kNames;
  names.cwd = "/work";
  names.json = true;
  names.target = "s1";
  auto back = DecodeRequest(EncodeRequest(names));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->type, RequestType::kNames);
  EXPECT_EQ(back->target, "s1");
  EXPECT_EQ(back->cwd, "/work");
  EXPECT_TRUE(back->json);
  names.cwd = "relative";  // as every request that runs a command: an absolute cwd
  EXPECT_FALSE(DecodeRequest(EncodeRequest(names)).ok());

  ServeRequest run;
  run.cwd = "/";
  run.run.session = "s";
  run.run.code = "1";
  run.run.sandbox.resolved = true;
  for (bool json_lines : {false, true}) {
    run.run.json_lines = json_lines;
    auto decoded = DecodeRequest(EncodeRequest(run));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(decoded->run.json_lines, json_lines);
  }
}

TEST(ServeMessages, BadMessagesAreNamedErrors) {
  struct Case {
    const char* frame;
    ErrorCode code;
    const char* phrase;
  } cases[] = {
      {"", ErrorCode::kInvalidArgument, "not a JSON object"},
      {"[1]", ErrorCode::kInvalidArgument, "not a JSON object"},
      {"{\"type\":\"run\"}", ErrorCode::kInvalidArgument, "no protocol version"},
      {"{\"v\":99,\"type\":\"run\"}", kOtherProtocolVersion, "version 99"},
      {"{\"v\":4,\"type\":\"explode\"}", ErrorCode::kInvalidArgument, "unknown type"},
      {"{\"v\":4,\"type\":7}", ErrorCode::kInvalidArgument, "'type' is not a string"},
      {"{\"v\":4,\"type\":\"run\",\"cwd\":\"Lw==\",\"env\":[]}", ErrorCode::kInvalidArgument,
       "missing field 'code'"},
      {"{\"v\":4,\"type\":\"run\",\"cwd\":\"Lw==\",\"env\":[],\"code\":\"@@\"}",
       ErrorCode::kInvalidArgument, "'code' is not base64"},
      {"{\"v\":4,\"type\":\"list\",\"cwd\":\"cmVs\",\"env\":[]}", ErrorCode::kInvalidArgument,
       "absolute"},
      {"{\"v\":4,\"type\":\"list\",\"cwd\":\"Lw==\",\"env\":[\"Tk9FUVVBTA==\"]}",
       ErrorCode::kInvalidArgument, "NAME=value"},
      {"{\"v\":4,\"type\":\"run\",\"cwd\":\"Lw==\",\"env\":[],\"code\":\"\",\"toolboxes\":[],"
       "\"gate\":\"yes\"}",
       ErrorCode::kInvalidArgument, "'gate' is not a boolean"},
      // A run without its Sandbox policy (a version-1 client's shape) is
      // refused, never run unwalled; a policy that does not validate too.
      {"{\"v\":4,\"type\":\"run\",\"cwd\":\"Lw==\",\"env\":[],\"code\":\"\",\"toolboxes\":[]}",
       ErrorCode::kInvalidArgument, "missing field 'sandbox'"},
      {"{\"v\":4,\"type\":\"run\",\"cwd\":\"Lw==\",\"env\":[],\"code\":\"\",\"toolboxes\":[],\"sandbox\":true}",
       ErrorCode::kInvalidArgument, "not an object"},
      {"{\"v\":4,\"type\":\"run\",\"cwd\":\"Lw==\",\"env\":[],\"code\":\"\",\"toolboxes\":[],\"sandbox\":{}}",
       ErrorCode::kInvalidArgument, "'network'"},
      {"{\"v\":1,\"type\":\"run\"}", kOtherProtocolVersion, "version 1"},
  };
  for (const auto& c : cases) {
    auto decoded = DecodeRequest(c.frame);
    ASSERT_FALSE(decoded.ok()) << c.frame;
    EXPECT_EQ(decoded.status().code(), c.code) << c.frame;
    EXPECT_NE(decoded.status().message().find(c.phrase), std::string::npos)
        << c.frame << ": " << decoded.status().message();
  }
  auto reply = DecodeReply("{\"v\":4,\"type\":\"output\",\"stdout\":\"\",\"stderr\":\"\"}");
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.status().message().find("exit_code"), std::string::npos);
}

// A run's stdout as it comes: "chunk" replies carry bytes that need not be
// UTF-8, whole.
TEST(ServeMessages, ChunkRepliesRoundTrip) {
  ServeReply chunk;
  chunk.type = ReplyType::kChunk;
  chunk.out = std::string("step 1\n\xff\x00tail", 14);
  auto decoded = DecodeReply(EncodeReply(chunk));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->type, ReplyType::kChunk);
  EXPECT_EQ(decoded->out, chunk.out);
}

}  // namespace
}  // namespace dolsot::cli
