// The server's frames and messages: nlohmann-json without exceptions
// (parse with allow_exceptions=false, every field's type checked).
#include "cli/serve_protocol.h"

#include "cli/base64.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace dolsot::cli {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::pair<RequestType, const char*> kRequestNames[] = {
    {RequestType::kRun, "run"},         {RequestType::kList, "list"},
    {RequestType::kReset, "reset"},     {RequestType::kRelease, "release"},
    {RequestType::kInterrupt, "interrupt"}, {RequestType::kStatus, "status"},
    {RequestType::kStop, "stop"},
};
constexpr std::pair<ReplyType, const char*> kReplyNames[] = {
    {ReplyType::kOutput, "output"},
    {ReplyType::kStatus, "status"},
    {ReplyType::kOk, "ok"},
    {ReplyType::kError, "error"},
};

std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Field readers: each sets `error` (once) instead of throwing.
class Fields {
 public:
  explicit Fields(const Json& json) : json_(json) {}

  const Json* Get(const char* name, bool required) {
    auto it = json_.find(name);
    if (it == json_.end() || it->is_null()) {
      if (required) Fail(std::string("missing field '") + name + "'");
      return nullptr;
    }
    return &*it;
  }
  std::string Text(const char* name) {
    const Json* v = Get(name, true);
    if (v == nullptr) return "";
    if (!v->is_string()) return Fail(std::string("field '") + name + "' is not a string"), "";
    return v->get<std::string>();
  }
  std::string Bytes(const char* name) {
    const Json* v = Get(name, true);
    if (v == nullptr) return "";
    return Decode(*v, name);
  }
  std::optional<std::string> OptionalBytes(const char* name) {
    const Json* v = Get(name, false);
    if (v == nullptr) return std::nullopt;
    return Decode(*v, name);
  }
  std::vector<std::string> BytesList(const char* name) {
    std::vector<std::string> out;
    const Json* v = Get(name, true);
    if (v == nullptr) return out;
    if (!v->is_array()) return Fail(std::string("field '") + name + "' is not a list"), out;
    for (const Json& item : *v) out.push_back(Decode(item, name));
    return out;
  }
  bool Flag(const char* name) {
    const Json* v = Get(name, false);
    if (v == nullptr) return false;
    if (!v->is_boolean()) return Fail(std::string("field '") + name + "' is not a boolean"), false;
    return v->get<bool>();
  }
  std::optional<long long> Integer(const char* name, bool required = false) {
    const Json* v = Get(name, required);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_integer()) {
      return Fail(std::string("field '") + name + "' is not an integer"), std::nullopt;
    }
    return v->get<long long>();
  }
  std::optional<double> Number(const char* name, bool required = false) {
    const Json* v = Get(name, required);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) return Fail(std::string("field '") + name + "' is not a number"), std::nullopt;
    return v->get<double>();
  }
  std::vector<std::string> TextList(const char* name) {
    std::vector<std::string> out;
    const Json* v = Get(name, false);
    if (v == nullptr) return out;
    if (!v->is_array()) return Fail(std::string("field '") + name + "' is not a list"), out;
    for (const Json& item : *v) {
      if (!item.is_string()) return Fail(std::string("field '") + name + "' holds a non-string"), out;
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  const std::string& error() const { return error_; }

 private:
  std::string Decode(const Json& v, const char* name) {
    if (!v.is_string()) return Fail(std::string("field '") + name + "' is not a string"), "";
    auto bytes = Base64Decode(v.get_ref<const std::string&>());
    if (!bytes) return Fail(std::string("field '") + name + "' is not base64"), "";
    return *bytes;
  }
  void Fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }
  const Json& json_;
  std::string error_;
};

// Parses a frame into an object of this protocol version.
StatusOr<Json> ParseMessage(std::string_view frame, const char* what) {
  Json json = Json::parse(frame, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return InvalidArgument(std::string("bad ") + what + ": not a JSON object");
  }
  auto version = json.find("v");
  if (version == json.end() || !version->is_number_integer()) {
    return InvalidArgument(std::string("bad ") + what + ": no protocol version");
  }
  if (version->get<long long>() != kServeProtocolVersion) {
    return Status(ErrorCode::kUnavailable,
                  std::string(what) + " of protocol version " +
                      std::to_string(version->get<long long>()) + ", this dolsot speaks " +
                      std::to_string(kServeProtocolVersion));
  }
  return json;
}

Json BytesList(const std::vector<std::string>& items) {
  Json out = Json::array();
  for (const auto& item : items) out.push_back(Base64Encode(item));
  return out;
}

Json OptionalNumber(const std::optional<long long>& n) { return n ? Json(*n) : Json(nullptr); }

Status WaitFor(int fd, short events, Deadline deadline, const std::function<Status()>& wait) {
  for (;;) {
    int timeout_ms = 100;
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
      if (left.count() <= 0) return Status(ErrorCode::kTimeout, "timed out");
      if (!wait) timeout_ms = static_cast<int>(std::min<long long>(left.count(), 1 << 30));
      else timeout_ms = static_cast<int>(std::min<long long>(left.count(), timeout_ms));
    } else if (!wait) {
      timeout_ms = -1;
    }
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, timeout_ms);
    if (n > 0) return Status::Ok();
    if (n < 0 && errno != EINTR) return IoError(std::string("poll: ") + std::strerror(errno));
    if (wait) DOLSOT_RETURN_IF_ERROR(wait());
  }
}

// Reads exactly `size` bytes; `got_any` says whether the first byte came.
Status ReadExact(int fd, char* data, std::size_t size, Deadline deadline,
                 const std::function<Status()>& wait, bool& got_any) {
  std::size_t done = 0;
  while (done < size) {
    DOLSOT_RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline, wait));
    ssize_t n = ::recv(fd, data + done, size - done, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      if (errno == ECONNRESET) return Status(ErrorCode::kUnavailable, "connection closed");
      return IoError(std::string("read: ") + std::strerror(errno));
    }
    if (n == 0) {
      if (!got_any) return Status(ErrorCode::kUnavailable, "connection closed");
      return CorruptError("connection closed inside a frame");
    }
    got_any = true;
    done += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

std::string RequestTypeName(RequestType type) {
  for (const auto& [t, name] : kRequestNames) {
    if (t == type) return name;
  }
  return "?";
}

std::string EncodeRequest(const ServeRequest& request) {
  Json json = Json::object();
  json["v"] = kServeProtocolVersion;
  json["type"] = RequestTypeName(request.type);
  json["json"] = request.json;
  json["cwd"] = Base64Encode(request.cwd);
  json["env"] = BytesList(request.env);
  if (request.type == RequestType::kRun) {
    const RunArgs& run = request.run;
    json["session"] = run.session ? Json(Base64Encode(*run.session)) : Json(nullptr);
    json["code"] = Base64Encode(run.code.value_or(""));
    json["toolboxes"] = BytesList(run.toolbox_specs);
    json["timeout"] = run.timeout_seconds ? Json(*run.timeout_seconds) : Json(nullptr);
    json["gate"] = run.gate;
    json["max_repr"] = OptionalNumber(run.max_repr);
    json["max_text"] = OptionalNumber(run.max_text);
  }
  if (request.type == RequestType::kReset || request.type == RequestType::kRelease) {
    json["target"] = Base64Encode(request.target);
  }
  return Dump(json);
}

StatusOr<ServeRequest> DecodeRequest(std::string_view frame) {
  auto parsed = ParseMessage(frame, "request");
  if (!parsed.ok()) return parsed.status();
  const Json& json = *parsed;
  Fields fields(json);
  ServeRequest request;
  const std::string type = fields.Text("type");
  bool known = false;
  for (const auto& [t, name] : kRequestNames) {
    if (type == name) {
      request.type = t;
      known = true;
    }
  }
  if (!fields.error().empty()) return InvalidArgument("bad request: " + fields.error());
  if (!known) return InvalidArgument("bad request: unknown type '" + type + "'");
  request.json = fields.Flag("json");
  if (request.type == RequestType::kRun || request.type == RequestType::kList ||
      request.type == RequestType::kReset) {
    request.cwd = fields.Bytes("cwd");
    request.env = fields.BytesList("env");
  }
  if (request.type == RequestType::kRun) {
    RunArgs& run = request.run;
    run.session = fields.OptionalBytes("session");
    run.code = fields.Bytes("code");
    run.toolbox_specs = fields.BytesList("toolboxes");
    run.timeout_seconds = fields.Number("timeout");
    run.gate = fields.Flag("gate");
    run.max_repr = fields.Integer("max_repr");
    run.max_text = fields.Integer("max_text");
  }
  if (request.type == RequestType::kReset || request.type == RequestType::kRelease) {
    request.target = fields.Bytes("target");
  }
  if (!fields.error().empty()) return InvalidArgument("bad request: " + fields.error());
  if (request.type == RequestType::kRun || request.type == RequestType::kList ||
      request.type == RequestType::kReset) {
    if (request.cwd.empty() || request.cwd[0] != '/') {
      return InvalidArgument("bad request: cwd must be an absolute path");
    }
    if (request.cwd.find('\0') != std::string::npos) {
      return InvalidArgument("bad request: cwd holds a NUL byte");
    }
    for (const auto& entry : request.env) {
      if (entry.find('=') == std::string::npos || entry.find('\0') != std::string::npos) {
        return InvalidArgument("bad request: an environment entry is not NAME=value");
      }
    }
  }
  return request;
}

std::string EncodeReply(const ServeReply& reply) {
  Json json = Json::object();
  json["v"] = kServeProtocolVersion;
  for (const auto& [t, name] : kReplyNames) {
    if (t == reply.type) json["type"] = name;
  }
  switch (reply.type) {
    case ReplyType::kOutput:
      json["stdout"] = Base64Encode(reply.out);
      json["stderr"] = Base64Encode(reply.err);
      json["exit_code"] = reply.exit_code;
      break;
    case ReplyType::kStatus:
      json["pid"] = reply.status.pid;
      json["socket"] = reply.status.socket;
      json["cache_dir"] = reply.status.cache_dir;
      json["uptime_seconds"] = reply.status.uptime_seconds;
      json["live_sessions"] = reply.status.live_sessions;
      json["profiles"] = reply.status.profiles;
      break;
    case ReplyType::kError:
      json["message"] = reply.message;
      break;
    case ReplyType::kOk:
      break;
  }
  return Dump(json);
}

StatusOr<ServeReply> DecodeReply(std::string_view frame) {
  auto parsed = ParseMessage(frame, "reply");
  if (!parsed.ok()) return parsed.status();
  Fields fields(*parsed);
  ServeReply reply;
  const std::string type = fields.Text("type");
  bool known = false;
  for (const auto& [t, name] : kReplyNames) {
    if (type == name) {
      reply.type = t;
      known = true;
    }
  }
  if (!fields.error().empty()) return InvalidArgument("bad reply: " + fields.error());
  if (!known) return InvalidArgument("bad reply: unknown type '" + type + "'");
  switch (reply.type) {
    case ReplyType::kOutput:
      reply.out = fields.Bytes("stdout");
      reply.err = fields.Bytes("stderr");
      reply.exit_code = static_cast<int>(fields.Integer("exit_code", true).value_or(1));
      break;
    case ReplyType::kStatus:
      reply.status.pid = fields.Integer("pid", true).value_or(0);
      reply.status.socket = fields.Text("socket");
      reply.status.cache_dir = fields.Text("cache_dir");
      reply.status.uptime_seconds = fields.Number("uptime_seconds", true).value_or(0);
      reply.status.live_sessions = fields.TextList("live_sessions");
      reply.status.profiles = static_cast<int>(fields.Integer("profiles").value_or(0));
      break;
    case ReplyType::kError:
      reply.message = fields.Text("message");
      break;
    case ReplyType::kOk:
      break;
  }
  if (!fields.error().empty()) return InvalidArgument("bad reply: " + fields.error());
  return reply;
}

Status WriteFrame(int fd, std::string_view payload, std::size_t limit) {
  if (payload.size() > limit) {
    return InvalidArgument("a frame of " + std::to_string(payload.size()) +
                           " bytes is over the limit of " + std::to_string(limit));
  }
  const auto size = static_cast<std::uint32_t>(payload.size());
  const unsigned char header[4] = {static_cast<unsigned char>(size >> 24),
                                   static_cast<unsigned char>(size >> 16),
                                   static_cast<unsigned char>(size >> 8),
                                   static_cast<unsigned char>(size)};
  std::string frame(reinterpret_cast<const char*>(header), 4);
  frame.append(payload);
  std::size_t done = 0;
  while (done < frame.size()) {
    ssize_t n = ::send(fd, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      return Status(ErrorCode::kUnavailable, "connection closed");
    }
    if (n < 0) return IoError(std::string("write: ") + std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

StatusOr<std::string> ReadFrame(int fd, std::size_t limit, Deadline deadline,
                                const std::function<Status()>& wait) {
  unsigned char header[4];
  bool got_any = false;
  DOLSOT_RETURN_IF_ERROR(
      ReadExact(fd, reinterpret_cast<char*>(header), 4, deadline, wait, got_any));
  const std::size_t size = (std::size_t{header[0]} << 24) | (std::size_t{header[1]} << 16) |
                           (std::size_t{header[2]} << 8) | std::size_t{header[3]};
  if (size > limit) {
    return CorruptError("a frame of " + std::to_string(size) + " bytes is over the limit of " +
                        std::to_string(limit));
  }
  std::string payload(size, '\0');
  if (size > 0) DOLSOT_RETURN_IF_ERROR(ReadExact(fd, payload.data(), size, deadline, wait, got_any));
  return payload;
}

}  // namespace dolsot::cli
