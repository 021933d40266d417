// The CLI's --json documents, serialized by nlohmann-json (never by hand).
// A string is always valid JSON: a byte that is not part of well-formed
// UTF-8 becomes U+FFFD, so a cell printing arbitrary bytes cannot break a
// host's JSON parser.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/session_info.h"

namespace dolsot::cli {

// {"ok", "value", "stdout", "error", "exit_code", "outcome", "error_type",
//  "held", "dropped", "save_error", "text", "images"}, in that order, on one
// line; "images" lists the paths the figures were written to (the PNG bytes
// themselves are not in the document).
std::string ResultToJson(const Result& result, const std::vector<std::string>& image_paths = {});
// [{"id", "size_bytes", "last_used"}, ...]; last_used in Unix seconds.
std::string SessionsToJson(const std::vector<SessionInfo>& sessions);
// {"reset": target, "removed": count}.
std::string ResetToJson(std::string_view target, int removed);

// The same documents as JSON values, for a protocol that embeds them
// (dolsot mcp's structured content).
nlohmann::ordered_json ResultJsonValue(const Result& result,
                                       const std::vector<std::string>& image_paths = {});
nlohmann::ordered_json SessionsJsonValue(const std::vector<SessionInfo>& sessions);
nlohmann::ordered_json ResetJsonValue(std::string_view target, int removed);

}  // namespace dolsot::cli
