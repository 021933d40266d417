// The --json documents: nlohmann::ordered_json keeps the documented key order.
#include "cli/json_writer.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/result_fields.h"

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

// The keys are core/result_fields.h's kResultJsonFields, in order; a field
// the table gains and this switch misses does not compile.
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
namespace {

Json ResultFieldJson(ResultField field, const Result& result,
                     const std::vector<std::string>& image_paths) {
  switch (field) {
    case ResultField::kOk: return result.ok;
    case ResultField::kValue: return OptionalString(result.value);
    case ResultField::kStdout: return result.stdout_text;
    case ResultField::kError: return OptionalString(result.error);
    case ResultField::kExitCode: return result.exit_code;
    case ResultField::kOutcome: return OutcomeName(result.outcome());
    case ResultField::kErrorType: return OptionalString(result.error_type);
    case ResultField::kHeld: return result.held;
    case ResultField::kDropped: return result.dropped;
    case ResultField::kSaveError: return OptionalString(result.save_error);
    case ResultField::kText: return result.Text();
    case ResultField::kImages: return image_paths;  // the files the CLI wrote them to
    case ResultField::kReturned:  // kResultNotInJson
    case ResultField::kMaxText: break;
  }
  return nullptr;
}

}  // namespace
#pragma GCC diagnostic pop

Json ResultJsonValue(const Result& result, const std::vector<std::string>& image_paths) {
  Json json = Json::object();
  for (ResultField field : kResultJsonFields) {
    json[std::string(ResultFieldName(field))] = ResultFieldJson(field, result, image_paths);
  }
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
