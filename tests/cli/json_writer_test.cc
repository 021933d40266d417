// JsonWriter: escaping, invalid UTF-8, and the Result / session shapes.
#include "cli/json_writer.h"

#include <gtest/gtest.h>

namespace dolsot::cli {
namespace {

std::string Quoted(std::string_view text) {
  std::string out;
  AppendJsonString(out, text);
  return out;
}

TEST(JsonStringTest, PlainAsciiIsQuotedUnchanged) {
  EXPECT_EQ(Quoted("hello world"), "\"hello world\"");
}

TEST(JsonStringTest, QuotesAndBackslashesAreEscaped) {
  EXPECT_EQ(Quoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
}

TEST(JsonStringTest, ControlCharactersAreEscaped) {
  EXPECT_EQ(Quoted("\n\t\r\b\f"), "\"\\n\\t\\r\\b\\f\"");
  EXPECT_EQ(Quoted(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(Quoted(std::string("a\0b", 3)), "\"a\\u0000b\"");
}

TEST(JsonStringTest, WellFormedUtf8PassesThrough) {
  EXPECT_EQ(Quoted("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x8D\x9A"),
            "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x8D\x9A\"");
}

TEST(JsonStringTest, EachInvalidByteBecomesAReplacementCharacter) {
  EXPECT_EQ(Quoted("a\xFF" "b"), "\"a\\ufffdb\"");
  // A truncated 3-byte sequence: both bytes are replaced.
  EXPECT_EQ(Quoted("\xE2\x82"), "\"\\ufffd\\ufffd\"");
  // An overlong encoding of '/' and a UTF-16 surrogate are not UTF-8.
  EXPECT_EQ(Quoted("\xC0\xAF"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(Quoted("\xED\xA0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
}

TEST(JsonStringTest, LineAndParagraphSeparatorsAreEscaped) {
  EXPECT_EQ(Quoted("\xE2\x80\xA8\xE2\x80\xA9"), "\"\\u2028\\u2029\"");
}

TEST(JsonWriterTest, NestsObjectsAndArraysWithCommas) {
  JsonWriter json;
  json.BeginObject()
      .Key("a").Int(1)
      .Key("b").BeginArray().Bool(true).Null().String("x").EndArray()
      .Key("c").BeginObject().EndObject()
      .EndObject();
  EXPECT_EQ(json.str(), "{\"a\":1,\"b\":[true,null,\"x\"],\"c\":{}}");
}

TEST(JsonWriterTest, NonFiniteDoublesAreNull) {
  JsonWriter json;
  json.BeginArray().Double(1.5).Double(std::numeric_limits<double>::infinity()).EndArray();
  EXPECT_EQ(json.str(), "[1.5,null]");
}

TEST(ResultToJsonTest, HasEveryFieldOfTheResult) {
  Result result;
  result.ok = false;
  result.stdout_text = "hi\n";
  result.error = "ZeroDivisionError: division by zero";
  result.exit_code = 1;
  result.held = {"x", "y"};
  result.dropped = {"conn"};
  EXPECT_EQ(ResultToJson(result),
            "{\"ok\":false,\"value\":null,\"stdout\":\"hi\\n\","
            "\"error\":\"ZeroDivisionError: division by zero\",\"exit_code\":1,"
            "\"held\":[\"x\",\"y\"],\"dropped\":[\"conn\"],\"text\":" +
                [&] { std::string t; AppendJsonString(t, result.Text()); return t; }() + "}");
}

TEST(ResultToJsonTest, ValueIsAStringWhenPresent) {
  Result result;
  result.value = "2";
  EXPECT_NE(ResultToJson(result).find("\"value\":\"2\""), std::string::npos);
}

TEST(SessionsToJsonTest, ListsIdSizeAndLastUsed) {
  EXPECT_EQ(SessionsToJson({{"a", 10, 1700000000.5}, {"b", 0, 0}}),
            "[{\"id\":\"a\",\"size_bytes\":10,\"last_used\":1700000000.5},"
            "{\"id\":\"b\",\"size_bytes\":0,\"last_used\":0}]");
  EXPECT_EQ(SessionsToJson({}), "[]");
}

TEST(ResetToJsonTest, NamesTheTargetAndTheCount) {
  EXPECT_EQ(ResetToJson("all", 3), "{\"reset\":\"all\",\"removed\":3}");
}

}  // namespace
}  // namespace dolsot::cli
