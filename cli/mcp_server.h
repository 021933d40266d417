// McpServer: the Model Context Protocol over JSON-RPC lines, served from one
// Backend. It answers initialize (version negotiation), ping and tools/list
// at once, runs each tools/call on a thread of its own (two sessions run in
// parallel; the backend keeps one session's cells in order), applies
// notifications/cancelled to the cell of that request, and writes every
// reply as one line under a mutex. It owns no file descriptor: the caller
// feeds it lines (cli/mcp_command.cc from stdin, tests from strings) and
// gives it a function that writes one.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/json_rpc.h"
#include "cli/mcp_tools.h"
#include "core/backend.h"

namespace dolsot::cli {

// The protocol revisions this server speaks, newest first: every revision
// that negotiates with `initialize` (the 2026 stateless revisions use
// server/discover, which is not offered). The client's own version is
// answered when listed, else the newest.
inline constexpr const char* kMcpProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                       "2024-11-05"};

struct McpServerOptions {
  std::string version = "unknown";               // serverInfo.version
  std::map<std::string, std::string> toolboxes;  // alias -> module, for the run tool's text
  std::function<double()> now;                   // Unix seconds (the sessions table's ages)
  // Requests served at once; one more is refused (kRpcServerBusy) rather
  // than given a thread.
  std::size_t max_in_flight = 64;
};

class McpServer {
 public:
  // Writes one line (the newline is the writer's to add); false once the
  // peer is gone. Called under the server's write mutex, from any thread.
  using LineWriter = std::function<bool(const std::string& line)>;

  // `backend` must outlive the server.
  McpServer(Backend& backend, LineWriter write_line, McpServerOptions options);
  ~McpServer();  // Shutdown()
  McpServer(const McpServer&) = delete;
  McpServer& operator=(const McpServer&) = delete;

  // Serves one line of input (LineSplitter's output: a line, or the error
  // of one that was too long). Never blocks on a cell.
  void HandleLine(StatusOr<std::string> line);

  // Stops every running cell (exit 130, rolled back), waits for every
  // request's thread and writes what they answer. Idempotent.
  void Shutdown();
  // Waits until no request is being served (tests).
  void WaitIdle();
  // False once a write failed: the peer is gone.
  bool PeerConnected() const;
  // The negotiated protocol revision ("" before initialize).
  std::string ProtocolVersion() const;

 private:
  struct Call;

  void Write(const std::string& line);
  void HandleMessage(RpcMessage message);
  void HandleRequest(const RpcMessage& request);
  void HandleNotification(const RpcMessage& notification);
  Json Initialize(const Json& params, RpcError& error);
  void StartToolCall(const RpcMessage& request);
  Json ServeToolCall(Call& call);
  void FinishCall(const std::shared_ptr<Call>& call, const Json& result);
  void JoinFinishedThreads();
  bool Structured() const;

  Backend& backend_;
  LineWriter write_line_;
  McpServerOptions options_;

  mutable std::mutex write_mutex_;
  bool peer_connected_ = true;  // guarded by write_mutex_

  mutable std::mutex mutex_;
  std::condition_variable idle_;
  std::string protocol_version_;                        // guarded by mutex_
  std::map<std::string, std::shared_ptr<Call>> calls_;  // by the id's JSON text; guarded
  std::size_t serving_ = 0;                             // calls not yet answered; guarded
  std::vector<std::thread> finished_;                   // threads to join; guarded
  bool shut_down_ = false;                              // guarded
};

}  // namespace dolsot::cli
