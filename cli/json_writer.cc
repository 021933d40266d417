// JsonWriter and the JSON shapes of the CLI's --json output.
#include "cli/json_writer.h"

#include <charconv>
#include <cmath>

#include "cli/utf8.h"

namespace dolsot::cli {
namespace {

constexpr std::string_view kReplacementCharacter = "\\ufffd";

void AppendUnicodeEscape(std::string& out, unsigned code) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\u00";
  out += kHex[(code >> 4) & 0xF];
  out += kHex[code & 0xF];
}

// Escapes one ASCII byte; returns false when it needs no escape.
bool AppendAsciiEscape(std::string& out, unsigned char byte) {
  switch (byte) {
    case '"': out += "\\\""; return true;
    case '\\': out += "\\\\"; return true;
    case '\b': out += "\\b"; return true;
    case '\f': out += "\\f"; return true;
    case '\n': out += "\\n"; return true;
    case '\r': out += "\\r"; return true;
    case '\t': out += "\\t"; return true;
    default: break;
  }
  if (byte < 0x20 || byte == 0x7F) {
    AppendUnicodeEscape(out, byte);
    return true;
  }
  return false;
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view text) {
  out += '"';
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto byte = static_cast<unsigned char>(text[pos]);
    if (byte < 0x80) {
      if (!AppendAsciiEscape(out, byte)) out += static_cast<char>(byte);
      ++pos;
      continue;
    }
    const std::size_t length = Utf8SequenceLength(text, pos);
    if (length == 0) {
      out += kReplacementCharacter;  // one replacement per invalid byte
      ++pos;
      continue;
    }
    const std::string_view sequence = text.substr(pos, length);
    // U+2028 / U+2029 are valid JSON but break JavaScript string literals.
    if (sequence == "\xE2\x80\xA8") {
      out += "\\u2028";
    } else if (sequence == "\xE2\x80\xA9") {
      out += "\\u2029";
    } else {
      out += sequence;
    }
    pos += length;
  }
  out += '"';
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_element_.empty()) {
    if (has_element_.back()) out_ += ',';
    has_element_.back() = true;
  }
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_ += '{';
  has_element_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  out_ += '}';
  has_element_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_ += '[';
  has_element_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  out_ += ']';
  has_element_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  BeforeValue();
  AppendJsonString(out_, key);
  out_ += ':';
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view text) {
  BeforeValue();
  AppendJsonString(out_, text);
  return *this;
}

JsonWriter& JsonWriter::OptionalString(const std::optional<std::string>& text) {
  return text ? String(*text) : Null();
}

JsonWriter& JsonWriter::StringArray(const std::vector<std::string>& items) {
  BeginArray();
  for (const auto& item : items) String(item);
  return EndArray();
}

JsonWriter& JsonWriter::Int(std::int64_t number) {
  BeforeValue();
  out_ += std::to_string(number);
  return *this;
}

JsonWriter& JsonWriter::Double(double number) {
  if (!std::isfinite(number)) return Null();
  BeforeValue();
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), number);
  out_.append(buffer, end);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool flag) {
  BeforeValue();
  out_ += flag ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

std::string ResultToJson(const Result& result) {
  JsonWriter json;
  json.BeginObject()
      .Key("ok").Bool(result.ok)
      .Key("value").OptionalString(result.value)
      .Key("stdout").String(result.stdout_text)
      .Key("error").OptionalString(result.error)
      .Key("exit_code").Int(result.exit_code)
      .Key("held").StringArray(result.held)
      .Key("dropped").StringArray(result.dropped)
      .Key("text").String(result.Text())
      .EndObject();
  return json.str();
}

std::string SessionsToJson(const std::vector<SessionInfo>& sessions) {
  JsonWriter json;
  json.BeginArray();
  for (const auto& session : sessions) {
    json.BeginObject()
        .Key("id").String(session.id)
        .Key("size_bytes").Int(static_cast<std::int64_t>(session.size_bytes))
        .Key("last_used").Double(session.last_used)
        .EndObject();
  }
  json.EndArray();
  return json.str();
}

std::string ResetToJson(std::string_view target, int removed) {
  JsonWriter json;
  json.BeginObject().Key("reset").String(target).Key("removed").Int(removed).EndObject();
  return json.str();
}

}  // namespace dolsot::cli
