// The --json documents: nlohmann::ordered_json keeps the documented key order.
#include "cli/json_writer.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace dolsot::cli {
namespace {

using Json = nlohmann::ordered_json;

// One line; invalid UTF-8 replaced (U+FFFD) instead of throwing.
std::string Dump(const Json& json) {
  return json.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

Json OptionalString(const std::optional<std::string>& text) {
  return text ? Json(*text) : Json(nullptr);
}

}  // namespace

std::string ResultToJson(const Result& result, const std::vector<std::string>& image_paths) {
  return Dump(ResultJsonValue(result, image_paths));
}

std::string SessionsToJson(const std::vector<SessionInfo>& sessions) {
  return Dump(SessionsJsonValue(sessions));
}

std::string ResetToJson(std::string_view target, int removed) {
  return Dump(ResetJsonValue(target, removed));
}

Json ResultJsonValue(const Result& result, const std::vector<std::string>& image_paths) {
  Json json = Json::object();
  json["ok"] = result.ok;
  json["value"] = OptionalString(result.value);
  json["stdout"] = result.stdout_text;
  json["error"] = OptionalString(result.error);
  json["exit_code"] = result.exit_code;
  json["outcome"] = OutcomeName(result.outcome());
  json["error_type"] = OptionalString(result.error_type);
  json["held"] = result.held;
  json["dropped"] = result.dropped;
  json["save_error"] = OptionalString(result.save_error);
  json["text"] = result.Text();
  json["images"] = image_paths;
  return json;
}

Json SessionsJsonValue(const std::vector<SessionInfo>& sessions) {
  Json json = Json::array();
  for (const auto& session : sessions) {
    Json entry = Json::object();
    entry["id"] = session.id;
    entry["size_bytes"] = session.size_bytes;
    // JSON has no NaN or infinity: such a time is null.
    entry["last_used"] = std::isfinite(session.last_used) ? Json(session.last_used) : Json(nullptr);
    json.push_back(std::move(entry));
  }
  return json;
}

Json ResetJsonValue(std::string_view target, int removed) {
  Json json = Json::object();
  json["reset"] = std::string(target);
  json["removed"] = removed;
  return json;
}

}  // namespace dolsot::cli
