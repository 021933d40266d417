// McpServer against a fake backend, over strings: the handshake, the tools
// and their schemas, every error answered (and the server still serving
// after it), calls in parallel, cancellation and shutdown.
#include "cli/mcp_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dolsot::cli {
namespace {

// Records what reaches it. A cell whose code is "block" waits until it is
// released or its StopCheck asks it to stop (then: Outcome::kInterrupted).
class FakeBackend final : public Backend {
 public:
  StatusOr<Result> Run(std::string_view session_id, std::string_view code,
                       const RunOptions& options) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      runs_.push_back(std::string(session_id) + ":" + std::string(code));
      timeouts_.push_back(options.timeout_seconds);
      ++running_;
    }
    changed_.notify_all();
    Result result;
    if (code == "stream" && options.live.on_output) options.live.on_output("one\n");
    if (code == "block" || code == "stream") {
      std::unique_lock<std::mutex> lock(mutex_);
      // The server polls nothing itself: the backend polls should_stop, as
      // the Repl does about every 50 ms.
      while (!released_ && !(options.should_stop && options.should_stop())) {
        changed_.wait_for(lock, std::chrono::milliseconds(5));
      }
      if (!released_) {
        result = Result::Failure(Outcome::kInterrupted, kExitInterrupted, "KeyboardInterrupt");
        ++stopped_;
        changed_.notify_all();
      }
    } else if (code == "fail") {
      result = Result::Failure(Outcome::kError, 3, "mytools.ToolError: nope", {"x"});
      result.error_type = "ToolError";
    } else if (code == "unsaved") {
      result.held = {"y"};
      result.save_error = "disk full";
      result.error = "warning: checkpoint not saved: disk full";
    } else if (code == "figure") {
      result.images = {std::string("\x89PNG", 4)};
    } else if (code == "refuse") {
      std::lock_guard<std::mutex> lock(mutex_);
      --running_;
      return Status(ErrorCode::kInvalidToolbox, "toolbox 'mt': No module named 'nope'");
    } else {
      result.value = "42";
      result.stdout_text = "hello\n";
      result.held = {"x"};
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --running_;
    }
    changed_.notify_all();
    return result;
  }
  const Capabilities& capabilities() const override {
    static const Capabilities kNone;
    return kNone;
  }
  Status Interrupt(std::string_view) override { return Status::Ok(); }
  StatusOr<std::vector<SessionInfo>> Sessions() override {
    return std::vector<SessionInfo>{{"old", 10, 100.0}, {"new", 2000, 900.0}};
  }
  StatusOr<int> Reset(std::string_view target) override {
    std::lock_guard<std::mutex> lock(mutex_);
    reset_target_ = target;
    return 1;
  }
  Status Close() override { return Status::Ok(); }

  // Waits (bounded) until `count` cells run at once.
  bool WaitRunning(int count) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(10), [&] { return running_ >= count; });
  }
  // Waits (bounded) until `count` cells were stopped.
  bool WaitStopped(int count) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(10), [&] { return stopped_ >= count; });
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = true;
    }
    changed_.notify_all();
  }
  std::vector<std::string> runs() {
    std::lock_guard<std::mutex> lock(mutex_);
    return runs_;
  }
  std::vector<std::optional<double>> timeouts() {
    std::lock_guard<std::mutex> lock(mutex_);
    return timeouts_;
  }
  int stopped() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stopped_;
  }
  std::string reset_target() {
    std::lock_guard<std::mutex> lock(mutex_);
    return reset_target_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> runs_;
  std::vector<std::optional<double>> timeouts_;
  int running_ = 0;
  int stopped_ = 0;
  bool released_ = false;
  std::string reset_target_;
};

class McpServerTest : public ::testing::Test {
 protected:
  McpServerTest() {
    McpServerOptions options;
    options.version = "9.9";
    options.toolboxes = {{"mt", "mytools"}};
    options.now = [] { return 1000.0; };
    options.max_in_flight = 4;
    server_ = std::make_unique<McpServer>(
        backend_,
        [this](const std::string& line) {
          std::lock_guard<std::mutex> lock(lines_mutex_);
          EXPECT_EQ(line.find('\n'), std::string::npos) << "one line per message";
          lines_.push_back(line);
          return true;
        },
        options);
  }
  ~McpServerTest() override { server_.reset(); }

  void SendLine(const std::string& line) { server_->HandleLine(line); }
  void Send(const Json& message) { SendLine(DumpLine(message)); }
  void Request(const Json& id, const std::string& method, Json params = nullptr) {
    Json message{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
    if (!params.is_null()) message["params"] = std::move(params);
    Send(message);
  }
  void Call(const Json& id, const std::string& tool, Json arguments) {
    Request(id, "tools/call", Json{{"name", tool}, {"arguments", std::move(arguments)}});
  }
  // Every line written so far, parsed.
  std::vector<Json> Replies() {
    std::lock_guard<std::mutex> lock(lines_mutex_);
    std::vector<Json> replies;
    for (const auto& line : lines_) replies.push_back(Json::parse(line));
    return replies;
  }
  // The one reply to `id` (after the server is idle).
  Json ReplyTo(const Json& id) {
    server_->WaitIdle();
    Json found;
    int count = 0;
    for (Json& reply : Replies()) {
      if (reply["id"] == id) {
        found = std::move(reply);
        ++count;
      }
    }
    EXPECT_EQ(count, 1) << "replies to " << id.dump();
    return found;
  }
  void Initialize(const std::string& version = "2025-11-25") {
    Request(0, "initialize",
            Json{{"protocolVersion", version}, {"capabilities", Json::object()},
                 {"clientInfo", Json{{"name", "test"}, {"version", "1"}}}});
  }

  FakeBackend backend_;
  std::mutex lines_mutex_;
  std::vector<std::string> lines_;
  std::unique_ptr<McpServer> server_;
};

TEST_F(McpServerTest, InitializeAnswersTheClientsVersionWhenSupported) {
  for (const char* version : kMcpProtocolVersions) {
    Request(version, "initialize", Json{{"protocolVersion", version}});
    Json reply = ReplyTo(version);
    EXPECT_EQ(reply["result"]["protocolVersion"], version);
    EXPECT_EQ(server_->ProtocolVersion(), version);
  }
  Json reply = ReplyTo("2025-11-25");
  EXPECT_EQ(reply["result"]["serverInfo"]["name"], "dolsot");
  EXPECT_EQ(reply["result"]["serverInfo"]["version"], "9.9");
  EXPECT_TRUE(reply["result"]["capabilities"].contains("tools"));
  EXPECT_TRUE(reply["result"]["instructions"].is_string());
}

TEST_F(McpServerTest, InitializeAnswersTheLatestForAnUnknownVersion) {
  Request(1, "initialize", Json{{"protocolVersion", "1999-01-01"}});
  EXPECT_EQ(ReplyTo(1)["result"]["protocolVersion"], kMcpProtocolVersions[0]);
  Request(2, "initialize", Json{{"protocolVersion", 5}});
  Json bad = ReplyTo(2);
  EXPECT_EQ(bad["error"]["code"], kRpcInvalidParams);
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("protocolVersion"), std::string::npos);
}

TEST_F(McpServerTest, PingAndNotificationsNeedNoAnswer) {
  Initialize();
  Send(Json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  Send(Json{{"jsonrpc", "2.0"}, {"method", "notifications/whatever"}});
  Send(Json{{"jsonrpc", "2.0"}, {"id", 99}, {"result", Json::object()}});  // a stray response
  Request("p", "ping");
  EXPECT_EQ(ReplyTo("p")["result"], Json::object());
  EXPECT_EQ(Replies().size(), 2u) << "initialize and ping only";
}

TEST_F(McpServerTest, ToolsListHasTheThreeToolsWithTheirSchemas) {
  Initialize();
  Request(1, "tools/list");
  Json tools = ReplyTo(1)["result"]["tools"];
  ASSERT_EQ(tools.size(), 3u);
  EXPECT_EQ(tools[0]["name"], "run");
  EXPECT_EQ(tools[1]["name"], "sessions");
  EXPECT_EQ(tools[2]["name"], "reset");
  const Json& run = tools[0];
  EXPECT_EQ(run["inputSchema"]["required"], (Json::array({"session", "code"})));
  EXPECT_EQ(run["inputSchema"]["properties"]["timeout"]["type"], "number");
  EXPECT_NE(run["description"].get<std::string>().find("mt (module mytools)"), std::string::npos);
  for (const char* field : {"ok", "value", "stdout", "error", "exit_code", "outcome",
                            "error_type", "held", "dropped", "save_error", "text", "images"}) {
    EXPECT_TRUE(run["outputSchema"]["properties"].contains(field)) << field;
  }
  EXPECT_EQ(tools[1]["annotations"]["readOnlyHint"], true);
  EXPECT_EQ(tools[2]["annotations"]["destructiveHint"], true);
}

TEST_F(McpServerTest, OlderProtocolsGetNoOutputSchemaNorStructuredContent) {
  Initialize("2025-03-26");
  Request(1, "tools/list");
  for (const Json& tool : ReplyTo(1)["result"]["tools"]) EXPECT_FALSE(tool.contains("outputSchema"));
  Call(2, "run", Json{{"session", "s"}, {"code", "x"}});
  Json result = ReplyTo(2)["result"];
  EXPECT_FALSE(result.contains("structuredContent"));
  EXPECT_EQ(result["content"][0]["type"], "text");
}

TEST_F(McpServerTest, RunReturnsTheResultAsStructuredContentAndText) {
  Initialize();
  Call(1, "run", Json{{"session", "work"}, {"code", "print('hello'); x = 42; x"}, {"timeout", 2.5}});
  Json result = ReplyTo(1)["result"];
  EXPECT_EQ(result["isError"], false);
  const Json& structured = result["structuredContent"];
  EXPECT_EQ(structured["ok"], true);
  EXPECT_EQ(structured["value"], "42");
  EXPECT_EQ(structured["stdout"], "hello\n");
  EXPECT_EQ(structured["held"], (Json::array({"x"})));
  EXPECT_EQ(structured["images"], 0);
  EXPECT_EQ(result["content"][0]["type"], "text");
  EXPECT_EQ(result["content"][0]["text"], structured["text"]);
  EXPECT_NE(result["content"][0]["text"].get<std::string>().find("42"), std::string::npos);
  EXPECT_EQ(backend_.runs(), (std::vector<std::string>{"work:print('hello'); x = 42; x"}));
  EXPECT_EQ(backend_.timeouts(), (std::vector<std::optional<double>>{2.5}));
}

TEST_F(McpServerTest, AFailedCellIsAToolErrorWithItsExitCode) {
  Initialize();
  Call(1, "run", Json{{"session", "work"}, {"code", "fail"}});
  Json result = ReplyTo(1)["result"];
  EXPECT_EQ(result["isError"], true);
  EXPECT_EQ(result["structuredContent"]["exit_code"], 3);
  EXPECT_EQ(result["structuredContent"]["error_type"], "ToolError");
  EXPECT_EQ(result["structuredContent"]["outcome"], "error");
  EXPECT_NE(result["content"][0]["text"].get<std::string>().find("ToolError: nope"),
            std::string::npos);
}

TEST_F(McpServerTest, ACellWhoseStateWasNotSavedIsAToolError) {
  // It ran, but the next call would not see what it did (the CLI's exit 75).
  Initialize();
  Call(1, "run", Json{{"session", "work"}, {"code", "unsaved"}});
  Json result = ReplyTo(1)["result"];
  EXPECT_EQ(result["isError"], true);
  EXPECT_EQ(result["structuredContent"]["ok"], true);
  EXPECT_EQ(result["structuredContent"]["save_error"], "disk full");
}

TEST_F(McpServerTest, FiguresBecomeImageBlocks) {
  Initialize();
  Call(1, "run", Json{{"session", "work"}, {"code", "figure"}});
  Json result = ReplyTo(1)["result"];
  ASSERT_EQ(result["content"].size(), 2u);
  EXPECT_EQ(result["content"][1]["type"], "image");
  EXPECT_EQ(result["content"][1]["mimeType"], "image/png");
  EXPECT_EQ(result["content"][1]["data"], "iVBORw==");
  EXPECT_EQ(result["structuredContent"]["images"], 1);
}

TEST_F(McpServerTest, BadArgumentsAreToolErrorsNamingTheProblemAndNothingRuns) {
  Initialize();
  struct Case {
    Json arguments;
    const char* phrase;
  };
  const std::vector<Case> cases = {
      {Json{{"code", "1"}}, "missing argument 'session'"},
      {Json{{"session", "s"}}, "missing argument 'code'"},
      {Json{{"session", 5}, {"code", "1"}}, "'session' must be a string"},
      {Json{{"session", "../etc"}, {"code", "1"}}, "../etc"},
      {Json{{"session", "all"}, {"code", "1"}}, "all"},
      {Json{{"session", "s"}, {"code", ""}}, "empty"},
      {Json{{"session", "s"}, {"code", std::string("a\0b", 3)}}, "NUL"},
      {Json{{"session", "s"}, {"code", "1"}, {"timeout", 0}}, "timeout"},
      {Json{{"session", "s"}, {"code", "1"}, {"timeout", "5"}}, "'timeout' must be a number"},
      {Json{{"session", "s"}, {"code", "1"}, {"verbose", true}}, "unknown argument 'verbose'"},
  };
  int id = 1;
  for (const Case& c : cases) {
    Call(id, "run", c.arguments);
    Json result = ReplyTo(id)["result"];
    EXPECT_EQ(result["isError"], true) << c.arguments.dump();
    const std::string text = result["content"][0]["text"];
    EXPECT_NE(text.find(c.phrase), std::string::npos) << c.arguments.dump() << ": " << text;
    EXPECT_FALSE(result.contains("structuredContent"));
    ++id;
  }
  EXPECT_TRUE(backend_.runs().empty());
}

TEST_F(McpServerTest, ABackendErrorIsAToolErrorWithItsMessage) {
  Initialize();
  Call(1, "run", Json{{"session", "s"}, {"code", "refuse"}});
  Json result = ReplyTo(1)["result"];
  EXPECT_EQ(result["isError"], true);
  EXPECT_NE(result["content"][0]["text"].get<std::string>().find("No module named 'nope'"),
            std::string::npos);
}

TEST_F(McpServerTest, SessionsAndReset) {
  Initialize();
  Call(1, "sessions", Json::object());
  Json sessions = ReplyTo(1)["result"];
  EXPECT_EQ(sessions["structuredContent"]["sessions"][0]["id"], "new") << "most recent first";
  EXPECT_EQ(sessions["structuredContent"]["sessions"][1]["size_bytes"], 10);
  EXPECT_NE(sessions["content"][0]["text"].get<std::string>().find("SESSION"), std::string::npos);
  Call(2, "reset", Json{{"session", "all"}});
  Json reset = ReplyTo(2)["result"];
  EXPECT_EQ(reset["structuredContent"], (Json{{"reset", "all"}, {"removed", 1}}));
  EXPECT_EQ(backend_.reset_target(), "all");
  Call(3, "reset", Json{{"session", "bad id"}});
  EXPECT_EQ(ReplyTo(3)["result"]["isError"], true);
  Call(4, "sessions", Json{{"extra", 1}});
  EXPECT_EQ(ReplyTo(4)["result"]["isError"], true);
}

TEST_F(McpServerTest, ProtocolErrorsAreAnsweredAndTheServerKeepsServing) {
  SendLine("this is not json");
  SendLine("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xc3\x28\"}");
  SendLine("   ");  // blank: skipped
  server_->HandleLine(Status(ErrorCode::kInvalidArgument, "a message is longer than 8 bytes"));
  Request(2, "no/such/method");
  Request(3, "tools/call", Json{{"name", "rm -rf"}});
  Request(4, "tools/call", Json::array({1}));
  Request(5, "tools/call", Json{{"name", "run"}, {"arguments", "x"}});
  Request(6, "ping");
  server_->WaitIdle();
  std::vector<Json> replies = Replies();
  ASSERT_EQ(replies.size(), 8u);
  EXPECT_EQ(replies[0]["error"]["code"], kRpcParseError);
  EXPECT_TRUE(replies[0]["id"].is_null());
  EXPECT_EQ(replies[1]["error"]["code"], kRpcParseError);
  EXPECT_NE(replies[1]["error"]["message"].get<std::string>().find("UTF-8"), std::string::npos);
  EXPECT_EQ(replies[2]["error"]["code"], kRpcInvalidRequest);
  EXPECT_EQ(replies[3]["error"]["code"], kRpcMethodNotFound);
  EXPECT_EQ(replies[3]["id"], 2);
  EXPECT_EQ(replies[4]["error"]["code"], kRpcInvalidParams);
  EXPECT_NE(replies[4]["error"]["message"].get<std::string>().find("unknown tool \"rm -rf\""),
            std::string::npos);
  EXPECT_EQ(replies[5]["error"]["code"], kRpcInvalidParams);
  EXPECT_EQ(replies[6]["error"]["code"], kRpcInvalidParams);
  EXPECT_EQ(replies[7]["result"], Json::object());
}

TEST_F(McpServerTest, CallsRunInParallelAndEachIsAnswered) {
  Initialize();
  Call(1, "run", Json{{"session", "a"}, {"code", "block"}});
  Call(2, "run", Json{{"session", "b"}, {"code", "block"}});
  ASSERT_TRUE(backend_.WaitRunning(2)) << "both cells run at once";
  Request(3, "ping");  // the reader is never blocked by a cell
  bool ping_answered = false;
  for (const Json& reply : Replies()) ping_answered = ping_answered || reply["id"] == 3;
  EXPECT_TRUE(ping_answered);
  backend_.Release();
  EXPECT_EQ(ReplyTo(1)["result"]["isError"], false);
  EXPECT_EQ(ReplyTo(2)["result"]["isError"], false);
}

TEST_F(McpServerTest, ARequestIdInUseOrTooManyCallsAreRefused) {
  Initialize();
  for (int id = 1; id <= 4; ++id) Call(id, "run", Json{{"session", "s" + std::to_string(id)}, {"code", "block"}});
  ASSERT_TRUE(backend_.WaitRunning(4));
  Call(1, "run", Json{{"session", "x"}, {"code", "1"}});
  Call(5, "run", Json{{"session", "x"}, {"code", "1"}});
  std::vector<Json> replies = Replies();
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[1]["error"]["code"], kRpcInvalidRequest);
  EXPECT_NE(replies[1]["error"]["message"].get<std::string>().find("already in use"), std::string::npos);
  EXPECT_EQ(replies[2]["error"]["code"], kRpcServerBusy);
  EXPECT_EQ(replies[2]["id"], 5);
  backend_.Release();
  server_->WaitIdle();
  EXPECT_EQ(Replies().size(), 7u);
}

TEST_F(McpServerTest, CancellationStopsThatCellAndItGetsNoResponse) {
  Initialize();
  Call("slow", "run", Json{{"session", "a"}, {"code", "block"}});
  Call(7, "run", Json{{"session", "b"}, {"code", "block"}});
  ASSERT_TRUE(backend_.WaitRunning(2));
  Send(Json{{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"},
            {"params", Json{{"requestId", "7"}, {"reason", "user"}}}});  // a quoted number
  Send(Json{{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"},
            {"params", Json{{"requestId", "no-such-request"}}}});        // ignored
  ASSERT_TRUE(backend_.WaitStopped(1));
  EXPECT_EQ(backend_.stopped(), 1) << "only the cancelled cell stopped";
  backend_.Release();
  server_->WaitIdle();
  for (const Json& reply : Replies()) EXPECT_NE(reply["id"], 7) << "no response to a cancelled request";
  EXPECT_EQ(ReplyTo("slow")["result"]["isError"], false);
}

TEST_F(McpServerTest, ShutdownStopsRunningCellsAndAnswersThem) {
  Initialize();
  Call(1, "run", Json{{"session", "a"}, {"code", "block"}});
  ASSERT_TRUE(backend_.WaitRunning(1));
  server_->Shutdown();
  EXPECT_EQ(backend_.stopped(), 1);
  Json result = ReplyTo(1)["result"];
  EXPECT_EQ(result["structuredContent"]["exit_code"], kExitInterrupted);
  EXPECT_EQ(result["isError"], true);
  Call(2, "run", Json{{"session", "a"}, {"code", "1"}});
  EXPECT_EQ(ReplyTo(2)["error"]["code"], kRpcInternalError) << "nothing new starts";
}

// A tools/call with a progressToken gets notifications/progress with the
// output so far while the cell runs, none after its result; one without a
// token gets none.
TEST_F(McpServerTest, AProgressTokenGetsTheOutputSoFarWhileTheCellRuns) {
  Initialize();
  Request(7, "tools/call", Json{{"name", "run"},
                                {"arguments", Json{{"session", "s"}, {"code", "stream"}}},
                                {"_meta", Json{{"progressToken", "tok"}}}});
  auto progress_lines = [&] {
    std::vector<Json> found;
    for (Json& reply : Replies()) {
      if (reply.value("method", "") == "notifications/progress") found.push_back(reply);
    }
    return found;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (progress_lines().empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a bounded poll of the output
  }
  std::vector<Json> progress = progress_lines();
  ASSERT_FALSE(progress.empty()) << "no progress while the cell ran";
  EXPECT_EQ(progress[0]["params"]["progressToken"], "tok");
  EXPECT_EQ(progress[0]["params"]["message"], "one\n");
  EXPECT_EQ(progress[0]["params"]["progress"], 4);
  backend_.Release();
  Json reply = ReplyTo(7);
  ASSERT_TRUE(reply.contains("result")) << reply.dump();
  std::vector<Json> all = Replies();
  EXPECT_EQ(all.back()["id"], 7) << "nothing after the result";

  Call(8, "run", Json{{"session", "t"}, {"code", "stream"}});
  ReplyTo(8);
  EXPECT_EQ(progress_lines().size(), progress.size()) << "no token, no progress";
}

TEST_F(McpServerTest, AFailedWriteMarksThePeerGone) {
  McpServer server(backend_, [](const std::string&) { return false; }, McpServerOptions{});
  EXPECT_TRUE(server.PeerConnected());
  server.HandleLine(std::string(R"({"jsonrpc":"2.0","id":1,"method":"ping"})"));
  EXPECT_FALSE(server.PeerConnected());
}

}  // namespace
}  // namespace dolsot::cli
