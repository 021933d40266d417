// JSON-RPC 2.0 framing: bounded lines, envelope checks, reply lines.
#include "cli/json_rpc.h"

#include <cstdio>

#include "core/utf8.h"

namespace dolsot::cli {
namespace {

// MCP messages nest a few levels; a line of 8 MiB of '[' would otherwise
// become millions of heap nodes before any check could look at it.
constexpr int kMaxNestingDepth = 64;

std::string HexByte(unsigned char byte) {
  char buffer[8];
  std::snprintf(buffer, sizeof(buffer), "0x%02x", byte);
  return buffer;
}

// The deepest nesting of arrays and objects outside strings, stopping early
// once past `limit`.
int NestingDepth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// nlohmann-json reports a syntax error only by throwing; this is the one
// place that catches it, turning it into a value.
StatusOr<Json> ParseJson(std::string_view text) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& error) {
    std::string what = error.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
    if (const std::size_t bracket = what.find("] "); bracket != std::string::npos) {
      what = what.substr(bracket + 2);
    }
    return InvalidArgument(what);
  }
}

RpcError Invalid(std::string message, Json id = nullptr) {
  return RpcError{kRpcInvalidRequest, "Invalid Request: " + std::move(message), std::move(id)};
}

// JSON-RPC allows a string, a number or null; MCP forbids null, and a
// fractional number is not an id anyone means.
bool IsUsableId(const Json& id) { return id.is_string() || id.is_number_integer(); }

}  // namespace

LineSplitter::LineSplitter(std::size_t max_line_bytes) : max_line_bytes_(max_line_bytes) {}

void LineSplitter::Feed(std::string_view bytes, const LineHandler& on_line) {
  while (!bytes.empty()) {
    const std::size_t newline = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, newline);
    if (!skipping_) {
      if (pending_.size() + piece.size() > max_line_bytes_) {
        pending_.clear();
        pending_.shrink_to_fit();
        skipping_ = true;
        on_line(InvalidArgument("a message is longer than " + std::to_string(max_line_bytes_) +
                                " bytes, the most dolsot mcp reads in one line; it was skipped"));
      } else {
        pending_.append(piece);
      }
    }
    if (newline == std::string_view::npos) return;
    bytes.remove_prefix(newline + 1);
    if (skipping_) {
      skipping_ = false;
    } else {
      Emit(on_line);
    }
  }
}

void LineSplitter::Finish(const LineHandler& on_line) {
  if (!skipping_ && !pending_.empty()) Emit(on_line);
  skipping_ = false;
}

void LineSplitter::Emit(const LineHandler& on_line) {
  std::string line = std::move(pending_);
  pending_.clear();
  if (!line.empty() && line.back() == '\r') line.pop_back();
  on_line(std::move(line));
}

bool IsBlankLine(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

std::variant<RpcMessage, RpcError> ParseRpcMessage(std::string_view line) {
  if (auto bad = FindInvalidUtf8(line)) {
    return RpcError{kRpcParseError,
                    "Parse error: the message is not valid UTF-8 (byte " +
                        HexByte(static_cast<unsigned char>(line[*bad])) + " at offset " +
                        std::to_string(*bad) + ")"};
  }
  if (NestingDepth(line, kMaxNestingDepth) > kMaxNestingDepth) {
    return Invalid("the message nests arrays or objects deeper than " +
                   std::to_string(kMaxNestingDepth) + " levels");
  }
  StatusOr<Json> parsed = ParseJson(line);
  if (!parsed.ok()) return RpcError{kRpcParseError, "Parse error: " + parsed.status().message()};
  Json& json = *parsed;
  if (json.is_array()) return Invalid("batches (JSON arrays) are not supported; send one message per line");
  if (!json.is_object()) return Invalid("a message is a JSON object");
  Json id = json.contains("id") ? json["id"] : Json(nullptr);
  const Json usable_id = IsUsableId(id) ? id : Json(nullptr);
  if (json.value("jsonrpc", Json()) != "2.0") return Invalid("\"jsonrpc\" must be \"2.0\"", usable_id);

  RpcMessage message;
  if (!json.contains("method")) {
    if (json.contains("result") || json.contains("error")) {
      message.kind = RpcMessage::Kind::kResponse;
      message.id = std::move(id);
      return message;
    }
    return Invalid("no \"method\"", usable_id);
  }
  if (!json["method"].is_string()) return Invalid("\"method\" must be a string", usable_id);
  message.method = json["method"].get<std::string>();
  if (json.contains("params")) {
    message.params = std::move(json["params"]);
    if (!message.params.is_object() && !message.params.is_array()) {
      return Invalid("\"params\" must be an object or an array", usable_id);
    }
  }
  if (!json.contains("id")) {
    message.kind = RpcMessage::Kind::kNotification;
    return message;
  }
  if (!IsUsableId(id)) return Invalid("\"id\" must be a string or an integer");
  message.kind = RpcMessage::Kind::kRequest;
  message.id = std::move(id);
  return message;
}

std::string DumpLine(const Json& json) {
  return json.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

std::string RpcResultLine(const Json& id, const Json& result) {
  Json json = Json::object();
  json["jsonrpc"] = "2.0";
  json["id"] = id;
  json["result"] = result;
  return DumpLine(json);
}

std::string RpcErrorLine(const RpcError& error) {
  Json json = Json::object();
  json["jsonrpc"] = "2.0";
  json["id"] = error.id;
  json["error"] = Json{{"code", error.code}, {"message", error.message}};
  return DumpLine(json);
}

}  // namespace dolsot::cli
