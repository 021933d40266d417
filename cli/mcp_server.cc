// McpServer: dispatch, the threads of tool calls, cancellation, shutdown.
#include "cli/mcp_server.h"

#include <atomic>
#include <memory>
#include <optional>
#include <variant>

#include "cli/mcp_progress.h"

namespace dolsot::cli {
namespace {

constexpr const char* kInstructions =
    "dolsot runs Python for you in named sessions whose state persists between calls. Call "
    "`run` with a session id of your choosing and the code of a cell; later cells in the same "
    "session see its variables, imports and functions. Keep large results in variables and "
    "print only what you need to read. `sessions` lists the stored sessions; `reset` forgets one.";

// A tools/call whose arguments passed their checks.
struct ToolRequest {
  std::string tool;
  RunCall run;               // run
  std::string reset_target;  // reset
  Json progress_token;       // run: the request's _meta.progressToken, or null
};

RpcError InvalidParams(const Json& id, const std::string& message) {
  return RpcError{kRpcInvalidParams, "Invalid params: " + message, id};
}

// The key of a request id in the table of calls: its JSON text, so the
// string "1" and the number 1 stay two ids.
std::string IdKey(const Json& id) { return DumpLine(id); }

// Checks a tools/call's params and the tool's arguments. A malformed call
// (no tool name, an unknown tool) is a JSON-RPC error; arguments the tool
// refuses are a tool error the model can read (`tool_error`).
std::variant<ToolRequest, RpcError> ParseToolCall(const RpcMessage& request,
                                                  std::string& tool_error) {
  const Json& params = request.params;
  if (!params.is_object()) return InvalidParams(request.id, "tools/call needs an object of params");
  auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    return InvalidParams(request.id, "tools/call needs \"name\", a string");
  }
  ToolRequest call;
  call.tool = name->get<std::string>();
  if (!IsKnownTool(call.tool)) {
    return InvalidParams(request.id, "unknown tool " + DumpLine(Json(call.tool)) +
                                         " (the tools are run, sessions, reset)");
  }
  Json arguments = params.value("arguments", Json::object());
  if (arguments.is_null()) arguments = Json::object();
  if (!arguments.is_object()) {
    return InvalidParams(request.id, "\"arguments\" of tools/call must be an object");
  }
  Status checked = Status::Ok();
  if (call.tool == kRunTool) {
    call.progress_token = McpProgress::TokenOf(params);
    auto run = ParseRunArguments(arguments);
    if (run.ok()) call.run = std::move(*run);
    checked = run.status();
  } else if (call.tool == kSessionsTool) {
    checked = ParseSessionsArguments(arguments);
  } else {
    auto target = ParseResetArguments(arguments);
    if (target.ok()) call.reset_target = std::move(*target);
    checked = target.status();
  }
  if (!checked.ok()) tool_error = call.tool + ": " + checked.message();
  return call;
}

}  // namespace

struct McpServer::Call {
  Json id;
  std::string key;
  ToolRequest request;
  std::atomic<bool> stop{false};    // polled by the running cell: true stops it
  std::atomic<bool> answer{true};   // false once the client cancelled the request
  std::thread thread;
};

McpServer::McpServer(Backend& backend, LineWriter write_line, McpServerOptions options)
    : backend_(backend), write_line_(std::move(write_line)), options_(std::move(options)) {}

McpServer::~McpServer() { Shutdown(); }

void McpServer::Write(const std::string& line) {
  std::lock_guard<std::mutex> lock(write_mutex_);
  if (peer_connected_ && !write_line_(line)) peer_connected_ = false;
}

bool McpServer::PeerConnected() const {
  std::lock_guard<std::mutex> lock(write_mutex_);
  return peer_connected_;
}

std::string McpServer::ProtocolVersion() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return protocol_version_;
}

bool McpServer::Structured() const {
  const std::string version = ProtocolVersion();
  // structuredContent and outputSchema came with 2025-06-18; before any
  // initialize, the newest revision's shape.
  return version.empty() || version >= std::string("2025-06-18");
}

void McpServer::HandleLine(StatusOr<std::string> line) {
  JoinFinishedThreads();
  if (!line.ok()) {
    Write(RpcErrorLine(RpcError{kRpcInvalidRequest, "Invalid Request: " + line.status().message()}));
    return;
  }
  if (IsBlankLine(*line)) return;
  auto parsed = ParseRpcMessage(*line);
  if (auto* error = std::get_if<RpcError>(&parsed)) {
    Write(RpcErrorLine(*error));
    return;
  }
  HandleMessage(std::get<RpcMessage>(std::move(parsed)));
}

void McpServer::HandleMessage(RpcMessage message) {
  switch (message.kind) {
    case RpcMessage::Kind::kRequest:
      HandleRequest(message);
      return;
    case RpcMessage::Kind::kNotification:
      HandleNotification(message);
      return;
    case RpcMessage::Kind::kResponse:
      return;  // this server sends no requests, so no response is awaited
  }
}

void McpServer::HandleRequest(const RpcMessage& request) {
  const std::string& method = request.method;
  if (method == "tools/call") {
    StartToolCall(request);
    return;
  }
  if (method == "initialize") {
    RpcError error;
    Json result = Initialize(request.params, error);
    if (result.is_null()) {
      error.id = request.id;
      Write(RpcErrorLine(error));
    } else {
      Write(RpcResultLine(request.id, result));
    }
    return;
  }
  if (method == "ping") {
    Write(RpcResultLine(request.id, Json::object()));
    return;
  }
  if (method == "tools/list") {
    ToolCatalog catalog{options_.toolboxes, Structured()};
    Write(RpcResultLine(request.id, Json{{"tools", ToolList(catalog)}}));
    return;
  }
  Write(RpcErrorLine(RpcError{kRpcMethodNotFound,
                              "Method not found: " + DumpLine(Json(method)), request.id}));
}

Json McpServer::Initialize(const Json& params, RpcError& error) {
  const Json requested = params.is_object() ? params.value("protocolVersion", Json()) : Json();
  if (!requested.is_string()) {
    error = RpcError{kRpcInvalidParams, "Invalid params: initialize needs \"protocolVersion\", a string"};
    return nullptr;
  }
  std::string version = kMcpProtocolVersions[0];
  for (const char* supported : kMcpProtocolVersions) {
    if (requested == supported) version = supported;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    protocol_version_ = version;
  }
  Json result = Json::object();
  result["protocolVersion"] = version;
  result["capabilities"] = Json{{"tools", Json{{"listChanged", false}}}};
  result["serverInfo"] = Json{{"name", "dolsot"}, {"version", options_.version}};
  result["instructions"] = kInstructions;
  return result;
}

void McpServer::HandleNotification(const RpcMessage& notification) {
  if (notification.method != "notifications/cancelled") return;  // initialized, progress...
  if (!notification.params.is_object()) return;
  const Json id = notification.params.value("requestId", Json());
  std::vector<std::string> keys{IdKey(id)};
  // A client may quote a numeric id as a string: "7" also names request 7.
  if (id.is_string() && !id.get<std::string>().empty() &&
      id.get<std::string>().find_first_not_of("0123456789") == std::string::npos &&
      id.get<std::string>().size() < 19) {
    keys.push_back(id.get<std::string>());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::string& key : keys) {
    auto it = calls_.find(key);
    if (it == calls_.end()) continue;
    // MCP: a cancelled request gets no response.
    it->second->answer = false;
    it->second->stop = true;
    return;
  }
}

void McpServer::StartToolCall(const RpcMessage& request) {
  std::string tool_error;
  auto parsed = ParseToolCall(request, tool_error);
  if (auto* error = std::get_if<RpcError>(&parsed)) {
    Write(RpcErrorLine(*error));
    return;
  }
  if (!tool_error.empty()) {
    Write(RpcResultLine(request.id, ToolErrorResult(tool_error)));
    return;
  }
  auto call = std::make_shared<Call>();
  call->id = request.id;
  call->key = IdKey(request.id);
  call->request = std::get<ToolRequest>(std::move(parsed));
  std::optional<RpcError> refused;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) {
      refused = RpcError{kRpcInternalError, "the server is shutting down", request.id};
    } else if (calls_.count(call->key)) {
      refused = RpcError{kRpcInvalidRequest,
                         "Invalid Request: request id " + call->key + " is already in use",
                         request.id};
    } else if (calls_.size() >= options_.max_in_flight) {
      refused = RpcError{kRpcServerBusy,
                         "server busy: " + std::to_string(options_.max_in_flight) +
                             " requests are already running; retry when one is answered",
                         request.id};
    } else {
      calls_.emplace(call->key, call);
      ++serving_;
      // The thread takes `mutex_` before it finishes, so `thread` is set
      // before the thread moves it away.
      call->thread = std::thread([this, call] { FinishCall(call, ServeToolCall(*call)); });
    }
  }
  if (refused) Write(RpcErrorLine(*refused));
}

Json McpServer::ServeToolCall(Call& call) {
  const ToolRequest& request = call.request;
  const std::string& tool = request.tool;
  if (tool == kRunTool) {
    RunOptions options;
    options.timeout_seconds = request.run.timeout_seconds;
    options.should_stop = [&call] { return call.stop.load(); };
    // With a progressToken: the output so far, while the cell runs.
    std::unique_ptr<McpProgress> progress;
    if (!request.progress_token.is_null()) {
      progress = std::make_unique<McpProgress>(request.progress_token,
                                               [this](const std::string& line) { Write(line); });
      options.live = progress->Callbacks();
    }
    auto result = backend_.Run(request.run.session, request.run.code, options);
    if (progress != nullptr) progress->Stop();  // none after the result
    if (!result.ok()) return ToolErrorResult("run: " + result.status().message());
    return RunToolResult(*result, Structured());
  }
  if (tool == kSessionsTool) {
    auto sessions = backend_.Sessions();
    if (!sessions.ok()) return ToolErrorResult("sessions: " + sessions.status().message());
    const double now = options_.now ? options_.now() : 0.0;
    return SessionsToolResult(std::move(*sessions), now, Structured());
  }
  auto removed = backend_.Reset(request.reset_target);
  if (!removed.ok()) return ToolErrorResult("reset: " + removed.status().message());
  return ResetToolResult(request.reset_target, *removed, Structured());
}

void McpServer::FinishCall(const std::shared_ptr<Call>& call, const Json& result) {
  if (call->answer) Write(RpcResultLine(call->id, result));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.erase(call->key);
    finished_.push_back(std::move(call->thread));
    --serving_;
  }
  idle_.notify_all();
}

void McpServer::JoinFinishedThreads() {
  std::vector<std::thread> finished;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished.swap(finished_);
  }
  for (std::thread& thread : finished) thread.join();
}

void McpServer::WaitIdle() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return serving_ == 0; });
  }
  JoinFinishedThreads();
}

void McpServer::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shut_down_ = true;
    for (auto& [key, call] : calls_) call->stop = true;
  }
  WaitIdle();
}

}  // namespace dolsot::cli
