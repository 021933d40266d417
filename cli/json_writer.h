// JsonWriter: builds one compact JSON document (the CLI's --json output).
// Strings are always valid JSON: control characters are escaped, and a byte
// that is not part of well-formed UTF-8 becomes U+FFFD, so a cell printing
// arbitrary bytes cannot break a host's JSON parser.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/session_info.h"

namespace dolsot::cli {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  // The key of the next value inside an object.
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view text);
  JsonWriter& OptionalString(const std::optional<std::string>& text);  // null if unset
  JsonWriter& StringArray(const std::vector<std::string>& items);
  JsonWriter& Int(std::int64_t number);
  JsonWriter& Double(double number);  // null for NaN / infinity
  JsonWriter& Bool(bool flag);
  JsonWriter& Null();

  const std::string& str() const { return out_; }

 private:
  void BeforeValue();

  std::string out_;
  // One entry per open container: true once it holds an element.
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

// Appends `text` as a quoted, escaped JSON string.
void AppendJsonString(std::string& out, std::string_view text);

// {"ok", "value", "stdout", "error", "exit_code", "held", "dropped", "text"}.
std::string ResultToJson(const Result& result);
// [{"id", "size_bytes", "last_used"}, ...]; last_used in Unix seconds.
std::string SessionsToJson(const std::vector<SessionInfo>& sessions);
// {"reset": target, "removed": count}.
std::string ResetToJson(std::string_view target, int removed);

}  // namespace dolsot::cli
