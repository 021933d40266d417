// Tests for LspConnection (typecheck/lsp_connection.h) over a socketpair: the
// test plays the language server on the other end.
#include "typecheck/lsp_connection.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace dolsot::typecheck {
namespace {

using nlohmann::json;

Deadline In(std::chrono::milliseconds ms) { return std::chrono::steady_clock::now() + ms; }
Deadline Soon() { return In(std::chrono::seconds(10)); }

std::string Frame(const std::string& body) {
  return "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A connection under test and the server's end of its socket.
class LspPair {
 public:
  LspPair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    client_ = std::make_unique<LspConnection>(fds[0]);
    server_ = fds[1];
  }
  ~LspPair() { CloseServer(); }
  LspConnection& client() { return *client_; }
  void CloseClient() { client_.reset(); }
  void CloseServer() {
    if (server_ >= 0) close(server_);
    server_ = -1;
  }
  // Writes all of `bytes` (blocking); false when the client is gone.
  bool Write(const std::string& bytes) const {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n = send(server_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }
  void WriteMessage(const json& message) const { EXPECT_TRUE(Write(Frame(message.dump()))); }
  // One message the client sent, parsed.
  json ReadMessage() const {
    std::string header;
    char c;
    while (header.find("\r\n\r\n") == std::string::npos && read(server_, &c, 1) == 1) header += c;
    std::size_t length = std::stoul(header.substr(header.find(':') + 1));
    std::string body(length, '\0');
    std::size_t got = 0;
    while (got < length) {
      ssize_t n = read(server_, body.data() + got, length - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    return json::parse(body);
  }

 private:
  std::unique_ptr<LspConnection> client_;
  int server_ = -1;
};

TEST(TypeGateLspConnection, ARequestIsFramedJsonRpc) {
  LspPair pair;
  StatusOr<long> id = pair.client().Request("textDocument/diagnostic",
                                            {{"textDocument", {{"uri", "file:///x.py"}}}}, Soon());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  json sent = pair.ReadMessage();
  EXPECT_EQ(sent["jsonrpc"], "2.0");
  EXPECT_EQ(sent["id"], *id);
  EXPECT_EQ(sent["method"], "textDocument/diagnostic");
  EXPECT_EQ(sent["params"]["textDocument"]["uri"], "file:///x.py");
  ASSERT_TRUE(pair.client().Notify("initialized", json::object(), Soon()).ok());
  json note = pair.ReadMessage();
  EXPECT_EQ(note["method"], "initialized");
  EXPECT_FALSE(note.contains("id"));
}

// Text with any character (quotes, backslashes, DEL, controls, non-ASCII)
// arrives exactly; bytes that are not UTF-8 arrive as U+FFFD.
TEST(TypeGateLspConnection, AnyTextArrivesExactly) {
  LspPair pair;
  std::string text = "a\"b\\c\x7f\n\t\x01 \xc3\xa9 \xf0\x9f\x8d\x9a";
  ASSERT_TRUE(pair.client().Notify("m", {{"text", text}, {"bad", "x\xff" "y"}}, Soon()).ok());
  json sent = pair.ReadMessage();
  EXPECT_EQ(sent["params"]["text"], text);
  EXPECT_EQ(sent["params"]["bad"], "x\xef\xbf\xbd" "y");
}

TEST(TypeGateLspConnection, AwaitResultAnswersServerRequestsAndSkipsTheRest) {
  LspPair pair;
  StatusOr<long> id = pair.client().Request("initialize", json::object(), Soon());
  ASSERT_TRUE(id.ok());
  pair.WriteMessage({{"jsonrpc", "2.0"}, {"method", "window/logMessage"}, {"params", {}}});
  pair.WriteMessage({{"jsonrpc", "2.0"}, {"id", "req-7"}, {"method", "workspace/configuration"}});
  pair.WriteMessage({{"jsonrpc", "2.0"}, {"id", 41}, {"method", "client/registerCapability"}});
  pair.WriteMessage({{"jsonrpc", "2.0"}, {"id", *id + 100}, {"result", "not this one"}});
  pair.WriteMessage({{"jsonrpc", "2.0"}, {"id", *id}, {"result", {{"capabilities", 1}}}});
  StatusOr<json> result = pair.client().AwaitResult(*id, "initialize", Soon());
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ((*result)["capabilities"], 1);
  pair.ReadMessage();  // the initialize request itself
  json first = pair.ReadMessage();
  EXPECT_EQ(first["id"], "req-7");  // the server's own id, string kept
  EXPECT_TRUE(first.contains("result") && first["result"].is_null());
  EXPECT_EQ(pair.ReadMessage()["id"], 41);
}

TEST(TypeGateLspConnection, AReplyArrivingByteByByteIsReassembled) {
  LspPair pair;
  StatusOr<long> id = pair.client().Request("m", json::object(), Soon());
  ASSERT_TRUE(id.ok());
  std::string body = json({{"id", *id}, {"result", "ok"}}).dump();
  std::string frame = "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
                      "content-LENGTH:  " + std::to_string(body.size()) + " \r\n\r\n" + body;
  std::thread writer([&] {
    for (char c : frame) {
      if (!pair.Write(std::string(1, c))) return;
    }
  });
  StatusOr<json> result = pair.client().AwaitResult(*id, "m", Soon());
  writer.join();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(*result, "ok");
}

TEST(TypeGateLspConnection, AMessageLargerThanTheSocketBufferIsSentWhole) {
  LspPair pair;
  std::string text(4u << 20, 'x');
  json received;
  std::thread reader([&] { received = pair.ReadMessage(); });
  Status sent = pair.client().Notify("big", {{"text", text}}, Soon());
  reader.join();
  ASSERT_TRUE(sent.ok()) << sent.ToString();
  EXPECT_EQ(received["params"]["text"].get<std::string>().size(), text.size());
}

TEST(TypeGateLspConnection, AnErrorReplyIsAnInternalError) {
  LspPair pair;
  pair.WriteMessage({{"id", 1}, {"error", {{"code", -32601}, {"message", "no such method"}}}});
  StatusOr<json> result = pair.client().Call("m", json::object(), Soon());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), ErrorCode::kInternal);
  EXPECT_NE(result.status().message().find("refused m: no such method"), std::string::npos);
}

struct BadFrame {
  const char* name;
  std::string bytes;
  const char* says;
};

class TypeGateLspBadFrame : public ::testing::TestWithParam<BadFrame> {};

TEST_P(TypeGateLspBadFrame, IsCorrupt) {
  LspPair pair;
  std::thread writer([&] { pair.Write(GetParam().bytes); });  // may be more than a socket holds
  StatusOr<json> result = pair.client().Call("m", json::object(), Soon());
  pair.CloseClient();  // the writer stops if the client stopped reading
  writer.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(result.status().message().find(GetParam().says), std::string::npos)
      << result.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Frames, TypeGateLspBadFrame,
    ::testing::Values(BadFrame{"MalformedJson", Frame("{\"id\": 1, "), "malformed JSON"},
                      BadFrame{"TrailingBytes", Frame("{\"id\": 1} x"), "malformed JSON"},
                      BadFrame{"NoLength", "Content-Type: x\r\n\r\n{}", "without a Content-Length"},
                      BadFrame{"BadLength", "Content-Length: 12abc\r\n\r\n{}",
                               "without a Content-Length"},
                      BadFrame{"Oversized", "Content-Length: 99999999999\r\n\r\n", "oversized"},
                      BadFrame{"EndlessHeader", std::string(kMaxLspMessageBytes + 10, 'h'),
                               "oversized"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(TypeGateLspConnection, AClosedServerIsUnavailable) {
  LspPair pair;
  ASSERT_TRUE(pair.Write("Content-Length: 100\r\n\r\n{\"id\""));
  pair.CloseServer();
  StatusOr<json> result = pair.client().AwaitResult(1, "m", Soon());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), ErrorCode::kUnavailable);
  EXPECT_FALSE(pair.client().Notify("m", json::object(), Soon()).ok());
}

TEST(TypeGateLspConnection, ASilentServerIsATimeoutAtTheDeadline) {
  LspPair pair;
  StatusOr<json> result = pair.client().AwaitResult(1, "m", In(std::chrono::milliseconds(50)));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), ErrorCode::kTimeout);
}

}  // namespace
}  // namespace dolsot::typecheck
