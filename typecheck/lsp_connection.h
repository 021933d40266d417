// A JSON-RPC 2.0 client connection to a language server over one stream
// socket, framed as LSP's base protocol (Content-Length headers). Every
// message is built and parsed by nlohmann-json. Private to typecheck/.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace dolsot::typecheck {

using Deadline = std::chrono::steady_clock::time_point;

// The largest message accepted from the server. A cell's diagnostics take
// kilobytes; more than this means ty misbehaves.
inline constexpr std::size_t kMaxLspMessageBytes = 8u << 20;

// Not thread-safe (the caller serializes). Every wait is bounded by the
// caller's deadline; a late server is a kTimeout, a closed one kUnavailable,
// a malformed or oversized message kCorrupt.
class LspConnection {
 public:
  // Takes ownership of `fd` (closed by the destructor) and makes it
  // non-blocking.
  explicit LspConnection(int fd);
  ~LspConnection();
  LspConnection(const LspConnection&) = delete;
  LspConnection& operator=(const LspConnection&) = delete;

  Status Notify(std::string_view method, const nlohmann::json& params, Deadline deadline);
  // Sends a request; returns its id.
  StatusOr<long> Request(std::string_view method, const nlohmann::json& params,
                         Deadline deadline);
  // The result of request `id` (null when the reply has none). Meanwhile it
  // answers every request the server makes with a null result, and skips
  // notifications and replies to other ids. A reply with an error is kInternal.
  StatusOr<nlohmann::json> AwaitResult(long id, std::string_view method, Deadline deadline);
  // Request, then AwaitResult.
  StatusOr<nlohmann::json> Call(std::string_view method, const nlohmann::json& params,
                                Deadline deadline);

 private:
  Status Send(const nlohmann::json& message, Deadline deadline);
  // One whole message from the server.
  StatusOr<nlohmann::json> Receive(Deadline deadline);
  Status WaitFor(short events, Deadline deadline);

  int fd_;
  std::string inbox_;  // bytes received, not yet a whole message
  long next_id_ = 1;
};

}  // namespace dolsot::typecheck
