// JSON-RPC 2.0 over newline-delimited JSON (the MCP stdio transport): lines
// cut from a byte stream with a bound, a line read into a request, a
// notification or a response, and the reply lines written back. Nothing here
// knows MCP's methods (cli/mcp_server.h does).
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "core/status.h"

namespace dolsot::cli {

using Json = nlohmann::ordered_json;

// JSON-RPC's own error codes.
inline constexpr int kRpcParseError = -32700;      // not JSON (or not UTF-8)
inline constexpr int kRpcInvalidRequest = -32600;  // JSON, but not a request
inline constexpr int kRpcMethodNotFound = -32601;
inline constexpr int kRpcInvalidParams = -32602;
inline constexpr int kRpcInternalError = -32603;
inline constexpr int kRpcServerBusy = -32000;      // implementation-defined: too many in flight

// The longest line accepted: a 1 MiB cell (kMaxCodeBytes) with every byte
// escaped as \u00XX is 6 MiB; the envelope needs little more.
inline constexpr std::size_t kMaxLineBytes = std::size_t{8} << 20;

// Cuts a byte stream into lines at '\n' (a "\r\n" ending loses its '\r').
// A line longer than the bound is reported once, as an error, and skipped up
// to its newline without being held in memory.
class LineSplitter {
 public:
  using LineHandler = std::function<void(StatusOr<std::string> line)>;
  explicit LineSplitter(std::size_t max_line_bytes = kMaxLineBytes);

  // Appends `bytes`; calls `on_line` for every line they complete.
  void Feed(std::string_view bytes, const LineHandler& on_line);
  // The end of the stream: a last line without its newline, if any.
  void Finish(const LineHandler& on_line);

 private:
  void Emit(const LineHandler& on_line);

  std::size_t max_line_bytes_;
  std::string pending_;
  bool skipping_ = false;  // inside an over-long line: drop up to its newline
};

// One message read from the peer.
struct RpcMessage {
  enum class Kind { kRequest, kNotification, kResponse };
  Kind kind = Kind::kRequest;
  Json id;              // a string or an integer (kRequest, kResponse)
  std::string method;   // kRequest, kNotification
  Json params;          // an object, an array, or null when absent
};

// A message that cannot be served: the error to answer with, to `id` (null
// when the message had no usable id).
struct RpcError {
  int code = kRpcInvalidRequest;
  std::string message;
  Json id = nullptr;
};

// Reads one line (without its newline). Invalid UTF-8 and malformed JSON are
// kRpcParseError naming what and where; a batch (a JSON array), a missing or
// wrong "jsonrpc", a null / fractional / non-scalar id or a non-string method
// are kRpcInvalidRequest.
std::variant<RpcMessage, RpcError> ParseRpcMessage(std::string_view line);

// A line that is only spaces or tabs carries no message (it is skipped).
bool IsBlankLine(std::string_view line);

// {"jsonrpc":"2.0","id":id,"result":result}, one line without its newline.
std::string RpcResultLine(const Json& id, const Json& result);
// {"jsonrpc":"2.0","id":id,"error":{"code","message"}}, one line.
std::string RpcErrorLine(const RpcError& error);

// One line of JSON: strings stay UTF-8, a byte that is not well-formed UTF-8
// becomes U+FFFD, so whatever a cell printed cannot break the peer's parser.
std::string DumpLine(const Json& json);

}  // namespace dolsot::cli
