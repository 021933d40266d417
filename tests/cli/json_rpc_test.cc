// JSON-RPC framing: lines cut with a bound, every envelope error named, and
// reply lines that stay one valid line whatever bytes they carry.
#include "cli/json_rpc.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/base64.h"

namespace dolsot::cli {
namespace {

struct Lines {
  std::vector<std::string> lines;
  std::vector<std::string> errors;
  LineSplitter::LineHandler Handler() {
    return [this](StatusOr<std::string> line) {
      if (line.ok()) {
        lines.push_back(*line);
      } else {
        errors.push_back(line.status().message());
      }
    };
  }
};

TEST(LineSplitterTest, CutsAtNewlinesAcrossChunksAndDropsCarriageReturns) {
  LineSplitter splitter;
  Lines got;
  splitter.Feed("{\"a\":1}\n{\"b\"", got.Handler());
  EXPECT_EQ(got.lines, (std::vector<std::string>{"{\"a\":1}"}));
  splitter.Feed(":2}\r\n\n", got.Handler());
  splitter.Feed("last", got.Handler());
  splitter.Finish(got.Handler());
  EXPECT_EQ(got.lines, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "", "last"}));
  EXPECT_TRUE(got.errors.empty());
}

TEST(LineSplitterTest, AnOverLongLineIsOneErrorAndTheNextLineIsServed) {
  LineSplitter splitter(/*max_line_bytes=*/8);
  Lines got;
  splitter.Feed("0123456", got.Handler());
  splitter.Feed("789abcdef", got.Handler());  // past the bound: reported now
  splitter.Feed("still the same line", got.Handler());
  splitter.Feed("\nok\n", got.Handler());
  ASSERT_EQ(got.errors.size(), 1u);
  EXPECT_NE(got.errors[0].find("longer than 8 bytes"), std::string::npos) << got.errors[0];
  EXPECT_EQ(got.lines, (std::vector<std::string>{"ok"}));
}

TEST(LineSplitterTest, ALineOfExactlyTheBoundIsAccepted) {
  LineSplitter splitter(4);
  Lines got;
  splitter.Feed("abcd\n", got.Handler());
  EXPECT_EQ(got.lines, (std::vector<std::string>{"abcd"}));
  EXPECT_TRUE(got.errors.empty());
}

RpcMessage Message(std::string_view line) {
  auto parsed = ParseRpcMessage(line);
  if (auto* error = std::get_if<RpcError>(&parsed)) {
    ADD_FAILURE() << line << ": " << error->message;
    return {};
  }
  return std::get<RpcMessage>(parsed);
}

RpcError Error(std::string_view line) {
  auto parsed = ParseRpcMessage(line);
  if (!std::holds_alternative<RpcError>(parsed)) {
    ADD_FAILURE() << line << " was accepted";
    return {};
  }
  return std::get<RpcError>(parsed);
}

TEST(ParseRpcMessageTest, ReadsRequestsNotificationsAndResponses) {
  RpcMessage request = Message(R"({"jsonrpc":"2.0","id":7,"method":"ping"})");
  EXPECT_EQ(request.kind, RpcMessage::Kind::kRequest);
  EXPECT_EQ(request.id, 7);
  EXPECT_EQ(request.method, "ping");
  EXPECT_TRUE(request.params.is_null());

  RpcMessage named = Message(R"({"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"run"}})");
  EXPECT_EQ(named.id, "a-1");
  EXPECT_EQ(named.params["name"], "run");

  RpcMessage note = Message(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  EXPECT_EQ(note.kind, RpcMessage::Kind::kNotification);

  RpcMessage response = Message(R"({"jsonrpc":"2.0","id":3,"result":{}})");
  EXPECT_EQ(response.kind, RpcMessage::Kind::kResponse);
}

TEST(ParseRpcMessageTest, MalformedJsonIsAParseErrorSayingWhere) {
  RpcError error = Error(R"({"jsonrpc":"2.0", "id": 1, "method": )");
  EXPECT_EQ(error.code, kRpcParseError);
  EXPECT_NE(error.message.find("Parse error"), std::string::npos);
  EXPECT_NE(error.message.find("column"), std::string::npos) << error.message;
  EXPECT_TRUE(error.id.is_null());
}

TEST(ParseRpcMessageTest, InvalidUtf8IsAParseErrorNamingTheByte) {
  RpcError error = Error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xff\"}");
  EXPECT_EQ(error.code, kRpcParseError);
  EXPECT_NE(error.message.find("not valid UTF-8"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("0xff at offset 35"), std::string::npos) << error.message;
}

TEST(ParseRpcMessageTest, EnvelopeErrorsAreInvalidRequestsKeepingAUsableId) {
  struct Case {
    const char* line;
    const char* phrase;
    bool keeps_id;
  };
  for (const Case& c : {
           Case{R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", "batches", false},
           Case{R"("ping")", "JSON object", false},
           Case{R"({"id":1,"method":"ping"})", "\"jsonrpc\" must be \"2.0\"", true},
           Case{R"({"jsonrpc":"1.0","id":1,"method":"ping"})", "\"jsonrpc\" must be", true},
           Case{R"({"jsonrpc":"2.0","id":1})", "no \"method\"", true},
           Case{R"({"jsonrpc":"2.0","id":1,"method":5})", "\"method\" must be a string", true},
           Case{R"({"jsonrpc":"2.0","id":1,"method":"m","params":3})", "\"params\"", true},
           Case{R"({"jsonrpc":"2.0","id":null,"method":"ping"})", "\"id\" must be", false},
           Case{R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})", "\"id\" must be", false},
           Case{R"({"jsonrpc":"2.0","id":[1],"method":"ping"})", "\"id\" must be", false},
       }) {
    RpcError error = Error(c.line);
    EXPECT_EQ(error.code, kRpcInvalidRequest) << c.line;
    EXPECT_NE(error.message.find(c.phrase), std::string::npos) << c.line << ": " << error.message;
    EXPECT_EQ(!error.id.is_null(), c.keeps_id) << c.line;
  }
}

TEST(ParseRpcMessageTest, DeepNestingIsRefusedBeforeItIsBuilt) {
  const std::string deep = R"({"jsonrpc":"2.0","id":1,"method":"m","params":{"a":)" +
                           std::string(10000, '[') + std::string(10000, ']') + "}}";
  RpcError error = Error(deep);
  EXPECT_EQ(error.code, kRpcInvalidRequest);
  EXPECT_NE(error.message.find("deeper than 64"), std::string::npos) << error.message;
  // Brackets inside strings are text, not nesting.
  const std::string text = R"({"jsonrpc":"2.0","id":1,"method":"m","params":{"code":")" +
                           std::string(1000, '[') + R"("}})";
  EXPECT_EQ(Message(text).params["code"].get<std::string>().size(), 1000u);
}

TEST(RpcLinesTest, RepliesAreOneLineOfValidJsonWhateverTheyCarry) {
  const std::string line = RpcResultLine(Json(1), Json{{"text", "a\nb\xff\x01"}});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  Json parsed = Json::parse(line);
  EXPECT_EQ(parsed["jsonrpc"], "2.0");
  EXPECT_EQ(parsed["id"], 1);
  EXPECT_EQ(parsed["result"]["text"], "a\nb\xEF\xBF\xBD\x01");  // U+FFFD for the bad byte

  Json error = Json::parse(RpcErrorLine(RpcError{kRpcMethodNotFound, "Method not found: x", "q"}));
  EXPECT_EQ(error["id"], "q");
  EXPECT_EQ(error["error"]["code"], -32601);
  EXPECT_EQ(error["error"]["message"], "Method not found: x");
}

TEST(Base64Test, EncodesWithPaddingAsRfc4648Says) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode(std::string("\x89PNG\r\n\x1a\n\0\xff", 10)), "iVBORw0KGgoA/w==");
}

}  // namespace
}  // namespace dolsot::cli
