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
    {RequestType::kStop, "stop"},       {RequestType::kNames, "names"},
};
// The requests that carry the caller's cwd and environment (the server runs
// a command for them as it would run directly).
bool HasCallerContext(RequestType type) {
  return type == RequestType::kRun || type == RequestType::kList || type == RequestType::kReset ||
         type == RequestType::kNames;
}
constexpr std::pair<ReplyType, const char*> kReplyNames[] = {
    {ReplyType::kOutput, "output"},
    {ReplyType::kStatus, "status"},
    {ReplyType::kOk, "ok"},
    {ReplyType::kError, "error"},
    {ReplyType::kChunk, "chunk"},
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
    return Status(kOtherProtocolVersion,
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

// A SandboxPolicy as JSON: every field, so that nothing of it can be
// dropped on the way (a field added to SandboxPolicy must be added here:
// the static_assert below is a reminder).
static_assert(sizeof(SandboxPolicy) == sizeof(bool) * 8 + sizeof(std::vector<SandboxMount>) +
                                           sizeof(std::map<std::string, std::string>) +
                                           sizeof(std::uint64_t) * 7,
              "SandboxPolicy changed: update SandboxToJson and SandboxFromJson");

Json SandboxToJson(const std::optional<SandboxPolicy>& policy) {
  if (!policy) return Json(nullptr);
  Json mounts = Json::array();
  for (const SandboxMount& m : policy->mounts) {
    mounts.push_back({Base64Encode(m.virtual_path), Base64Encode(m.host_path), MountModeName(m.mode)});
  }
  Json env = Json::array();
  for (const auto& [name, value] : policy->env) env.push_back({Base64Encode(name), Base64Encode(value)});
  return Json{{"network", policy->network},       {"mounts", mounts},
              {"env", env},                       {"memory_mb", policy->memory_mb},
              {"processes", policy->processes},   {"open_files", policy->open_files},
              {"file_size_mb", policy->file_size_mb}, {"disk_mb", policy->disk_mb},
              {"cpu_seconds", policy->cpu_seconds}, {"best_effort", policy->best_effort}};
}

StatusOr<std::optional<SandboxPolicy>> SandboxFromJson(const Json& json) {
  if (json.is_null()) return std::optional<SandboxPolicy>();
  if (!json.is_object()) return InvalidArgument("the sandbox policy is not an object");
  SandboxPolicy policy;
  auto flag = [&](const char* name, bool& out) -> Status {
    auto it = json.find(name);
    if (it == json.end() || !it->is_boolean()) {
      return InvalidArgument(std::string("the sandbox policy's '") + name + "' is not a boolean");
    }
    out = it->get<bool>();
    return Status::Ok();
  };
  auto number = [&](const char* name, std::uint64_t& out) -> Status {
    auto it = json.find(name);
    if (it == json.end() || !it->is_number_unsigned()) {
      return InvalidArgument(std::string("the sandbox policy's '") + name + "' is not a count");
    }
    out = it->get<std::uint64_t>();
    return Status::Ok();
  };
  auto bytes = [](const Json& v) -> std::optional<std::string> {
    if (!v.is_string()) return std::nullopt;
    return Base64Decode(v.get_ref<const std::string&>());
  };
  DOLSOT_RETURN_IF_ERROR(flag("network", policy.network));
  DOLSOT_RETURN_IF_ERROR(flag("best_effort", policy.best_effort));
  DOLSOT_RETURN_IF_ERROR(number("memory_mb", policy.memory_mb));
  DOLSOT_RETURN_IF_ERROR(number("processes", policy.processes));
  DOLSOT_RETURN_IF_ERROR(number("open_files", policy.open_files));
  DOLSOT_RETURN_IF_ERROR(number("file_size_mb", policy.file_size_mb));
  DOLSOT_RETURN_IF_ERROR(number("disk_mb", policy.disk_mb));
  DOLSOT_RETURN_IF_ERROR(number("cpu_seconds", policy.cpu_seconds));
  auto mounts = json.find("mounts");
  if (mounts == json.end() || !mounts->is_array()) {
    return InvalidArgument("the sandbox policy's 'mounts' is not a list");
  }
  for (const Json& m : *mounts) {
    if (!m.is_array() || m.size() != 3 || !m[2].is_string()) {
      return InvalidArgument("a sandbox mount is not [virtual, host, mode]");
    }
    auto virt = bytes(m[0]);
    auto host = bytes(m[1]);
    auto mode = ParseMountMode(m[2].get<std::string>());
    if (!virt || !host) return InvalidArgument("a sandbox mount's path is not base64");
    if (!mode.ok()) return mode.status();
    policy.mounts.push_back({std::move(*virt), std::move(*host), *mode});
  }
  auto env = json.find("env");
  if (env == json.end() || !env->is_array()) {
    return InvalidArgument("the sandbox policy's 'env' is not a list");
  }
  for (const Json& e : *env) {
    std::optional<std::string> name, value;
    if (e.is_array() && e.size() == 2) name = bytes(e[0]), value = bytes(e[1]);
    if (!name || !value) return InvalidArgument("a sandbox env entry is not [name, value] in base64");
    if (!policy.env.emplace(std::move(*name), std::move(*value)).second) {
      return InvalidArgument("a sandbox env name is given twice");
    }
  }
  if (json.size() != 10) return InvalidArgument("the sandbox policy has unknown fields");
  DOLSOT_RETURN_IF_ERROR(ValidateSandboxPolicy(policy));
  return std::optional<SandboxPolicy>(std::move(policy));
}

}  // namespace

std::string RequestTypeName(RequestType type) {
  for (const auto& [t, name] : kRequestNames) {
    if (t == type) return name;
  }
  return "?";
}

std::string EncodeSandboxPolicy(const std::optional<SandboxPolicy>& policy) {
  return Dump(SandboxToJson(policy));
}

StatusOr<std::optional<SandboxPolicy>> DecodeSandboxPolicy(std::string_view text) {
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return InvalidArgument("the sandbox policy is not JSON");
  return SandboxFromJson(json);
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
    json["json_lines"] = run.json_lines;
    json["max_repr"] = OptionalNumber(run.max_repr);
    json["max_text"] = OptionalNumber(run.max_text);
    // Always the policy the caller resolved (null: none), never its flags:
    // the server reads neither the flags nor its own environment for it.
    json["sandbox"] = SandboxToJson(run.sandbox.policy);
    json["accept_weaker_walls"] = run.sandbox.accept_weaker_walls;
  }
  if (request.type == RequestType::kReset || request.type == RequestType::kRelease ||
      request.type == RequestType::kNames) {
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
  if (HasCallerContext(request.type)) {
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
    run.json_lines = fields.Flag("json_lines");
    run.max_repr = fields.Integer("max_repr");
    run.max_text = fields.Integer("max_text");
    run.sandbox.accept_weaker_walls = fields.Flag("accept_weaker_walls");
  }
  if (request.type == RequestType::kReset || request.type == RequestType::kRelease ||
      request.type == RequestType::kNames) {
    request.target = fields.Bytes("target");
  }
  if (!fields.error().empty()) return InvalidArgument("bad request: " + fields.error());
  if (request.type == RequestType::kRun) {
    auto sandbox = json.find("sandbox");
    if (sandbox == json.end()) return InvalidArgument("bad request: missing field 'sandbox'");
    auto policy = SandboxFromJson(*sandbox);
    if (!policy.ok()) return InvalidArgument("bad request: " + policy.status().message());
    request.run.sandbox.resolved = true;
    request.run.sandbox.sandbox = policy->has_value();
    request.run.sandbox.policy = std::move(policy).value();
  }
  if (HasCallerContext(request.type)) {
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
    case ReplyType::kChunk:
      json["stdout"] = Base64Encode(reply.out);
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
    case ReplyType::kChunk:
      reply.out = fields.Bytes("stdout");
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
