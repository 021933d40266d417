// The --json documents: every field, valid JSON whatever bytes a cell printed.
#include "cli/json_writer.h"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

namespace dolsot::cli {
namespace {

using Json = nlohmann::json;

Result Printed(std::string stdout_text) {
  Result result;
  result.stdout_text = std::move(stdout_text);
  return result;
}

TEST(ResultToJsonTest, HasEveryFieldOfTheResultInOrder) {
  Result result = Result::Failure(Outcome::kError, 1, "ZeroDivisionError: division by zero",
                                  {"x", "y"});
  result.stdout_text = "hi\n";
  result.dropped = {"conn"};
  const std::string text = ResultToJson(result);
  EXPECT_EQ(text.find('\n'), std::string::npos) << "one line";
  EXPECT_EQ(text.rfind("{\"ok\":false,\"value\":null,\"stdout\":\"hi\\n\",\"error\":", 0), 0u)
      << text;
  Json json = Json::parse(text);
  EXPECT_EQ(json["exit_code"], 1);
  EXPECT_EQ(json["outcome"], "error");
  EXPECT_EQ(json["held"], (Json{"x", "y"}));
  EXPECT_EQ(json["dropped"], (Json{"conn"}));
  EXPECT_EQ(json["text"], result.Text());
  std::vector<std::string> keys;
  nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  for (auto& [key, value] : ordered.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"ok", "value", "stdout", "error", "exit_code",
                                            "outcome", "error_type", "held", "dropped",
                                            "save_error", "text", "images"}));
  EXPECT_EQ(json["images"], Json::array());
  EXPECT_EQ(json["save_error"], nullptr);
}

TEST(ResultToJsonTest, OutcomeNamesWhatHappened) {
  Result timed_out = Result::Failure(Outcome::kTimeout, 124, "TimeoutError: ...");
  EXPECT_EQ(Json::parse(ResultToJson(timed_out))["outcome"], "timeout");
  EXPECT_EQ(Json::parse(ResultToJson(timed_out))["error_type"], "TimeoutError");
  EXPECT_EQ(Json::parse(ResultToJson(Result{}))["outcome"], "ok");
  EXPECT_EQ(Json::parse(ResultToJson(Result{}))["error_type"], nullptr);
}

TEST(ResultToJsonTest, ValueIsAStringWhenPresent) {
  Result result;
  result.value = "2";
  EXPECT_EQ(Json::parse(ResultToJson(result))["value"], "2");
}

TEST(ResultToJsonTest, EscapesQuotesAndControlCharacters) {
  const std::string printed("a\"b\\c\n\t\r\b\f\x01\x1f" "\0z", 13);
  Json json = Json::parse(ResultToJson(Printed(printed)));
  EXPECT_EQ(json["stdout"], printed) << "every byte round-trips";
}

TEST(ResultToJsonTest, WellFormedUtf8PassesThrough) {
  const std::string printed = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x8D\x9A \xE2\x80\xA8";
  EXPECT_EQ(Json::parse(ResultToJson(Printed(printed)))["stdout"], printed);
}

TEST(ResultToJsonTest, InvalidUtf8BecomesReplacementCharactersNotBrokenJson) {
  for (const std::string& bad : {std::string("a\xFF" "b"), std::string("\xE2\x82"),
                                std::string("\xC0\xAF"), std::string("\xED\xA0\x80")}) {
    std::string text = ResultToJson(Printed(bad));
    Json json = Json::parse(text);  // throws if the document were not valid JSON
    std::string out = json["stdout"];
    EXPECT_NE(out.find("\xEF\xBF\xBD"), std::string::npos) << "U+FFFD for " << text;
    EXPECT_EQ(out.find('\xFF'), std::string::npos);
  }
}

TEST(SessionsToJsonTest, ListsIdSizeAndLastUsed) {
  EXPECT_EQ(SessionsToJson({{"a", 10, 1700000000.5}, {"b", 0, 0}}),
            "[{\"id\":\"a\",\"size_bytes\":10,\"last_used\":1700000000.5},"
            "{\"id\":\"b\",\"size_bytes\":0,\"last_used\":0.0}]");
  EXPECT_EQ(SessionsToJson({}), "[]");
}

TEST(SessionsToJsonTest, NonFiniteTimesAreNull) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(Json::parse(SessionsToJson({{"a", 1, inf}}))[0]["last_used"], nullptr);
}

TEST(ResetToJsonTest, NamesTheTargetAndTheCount) {
  EXPECT_EQ(ResetToJson("all", 3), "{\"reset\":\"all\",\"removed\":3}");
}

}  // namespace
}  // namespace dolsot::cli
