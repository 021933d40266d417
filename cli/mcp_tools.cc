// The MCP tools: schemas, argument checks, results.
#include "cli/mcp_tools.h"

#include <cmath>

#include "cli/base64.h"
#include "cli/code_input.h"
#include "cli/json_writer.h"
#include "cli/list_sessions_command.h"
#include "cli/reset_command.h"
#include "cli/table.h"
#include "core/backend.h"
#include "core/config.h"
#include "core/session_id.h"

namespace dolsot::cli {
namespace {

// A session id as core/session_id.h defines it ("all" is refused by the
// server's own check; a JSON Schema pattern has no portable way to say it).
constexpr const char* kSessionIdPattern = "^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$";

Json StringType(const char* description) {
  return Json{{"type", "string"}, {"description", description}};
}

Json NullableString(const char* description) {
  return Json{{"type", Json::array({"string", "null"})}, {"description", description}};
}

Json StringList(const char* description) {
  return Json{{"type", "array"}, {"items", Json{{"type", "string"}}}, {"description", description}};
}

Json ObjectSchema(Json properties, Json required, bool closed = true) {
  Json schema = Json::object();
  schema["type"] = "object";
  schema["properties"] = std::move(properties);
  schema["required"] = std::move(required);
  if (closed) schema["additionalProperties"] = false;
  return schema;
}

Json SessionProperty(const char* description) {
  Json property = StringType(description);
  property["pattern"] = kSessionIdPattern;
  return property;
}

std::string RunDescription(const ToolCatalog& catalog) {
  std::string text =
      "Run a cell of Python in a session. The session keeps its state (variables, imports, "
      "functions, DataFrames) from one call to the next: use one stable session id per task. "
      "The value of the cell's trailing expression is returned, as in a notebook, after what it "
      "printed. A cell that raises returns its traceback (isError); one that runs past its "
      "timeout is killed (exit_code 124) and the session goes back to its state before the "
      "cell. Figures the cell shows with matplotlib come back as PNG images.";
  if (!catalog.toolboxes.empty()) {
    text += " Toolboxes already imported in every session:";
    const char* separator = " ";
    for (const auto& [alias, module] : catalog.toolboxes) {
      text += separator + alias + " (module " + module + ")";
      separator = ", ";
    }
    text += ".";
  }
  return text;
}

Json RunOutputSchema() {
  Json outcomes = Json::array();
  for (Outcome outcome : {Outcome::kOk, Outcome::kError, Outcome::kTimeout, Outcome::kInterrupted,
                          Outcome::kCrashed, Outcome::kRejected, Outcome::kWorkerLost}) {
    outcomes.push_back(OutcomeName(outcome));
  }
  Json properties = Json::object();
  properties["ok"] = Json{{"type", "boolean"}, {"description", "true if the cell ran without raising"}};
  properties["value"] = NullableString("the repr of the trailing expression's value, bounded");
  properties["stdout"] = StringType("what the cell printed");
  properties["error"] = NullableString("the error (a traceback of the cell's own frames)");
  properties["exit_code"] = Json{{"type", "integer"},
                                 {"description", "0; a toolbox exception's own exit_code; 1 any "
                                                 "other failure; 124 timeout; 130 interrupted"}};
  properties["outcome"] = Json{{"type", "string"}, {"enum", outcomes},
                               {"description", "what happened to the cell: decide on this"}};
  properties["error_type"] = NullableString("the exception's type name when ok is false");
  properties["held"] = StringList("names now in the session");
  properties["dropped"] = StringList("names that could not be persisted (still live)");
  properties["save_error"] = NullableString("why the session's state could not be saved");
  properties["text"] = StringType("stdout, value, error and banners joined for a reader");
  properties["images"] = Json{{"type", "integer"}, {"minimum", 0},
                              {"description", "how many PNG image blocks follow the text"}};
  Json required = Json::array();
  for (const auto& [name, schema] : properties.items()) required.push_back(name);
  return ObjectSchema(std::move(properties), std::move(required), /*closed=*/false);
}

Json Tool(const char* name, const char* title, const std::string& description, Json input,
          Json output, Json annotations, bool structured) {
  Json tool = Json::object();
  tool["name"] = name;
  if (structured) tool["title"] = title;
  tool["description"] = description;
  tool["inputSchema"] = std::move(input);
  if (structured) tool["outputSchema"] = std::move(output);
  annotations["title"] = title;
  tool["annotations"] = std::move(annotations);
  return tool;
}

// Refuses any argument name outside `known`.
Status CheckArgumentNames(const Json& arguments, std::initializer_list<const char*> known) {
  if (!arguments.is_object()) return InvalidArgument("the arguments must be a JSON object");
  for (const auto& [name, value] : arguments.items()) {
    bool found = false;
    for (const char* k : known) found = found || name == k;
    if (!found) return InvalidArgument("unknown argument '" + name + "'");
  }
  return Status::Ok();
}

StatusOr<std::string> RequiredString(const Json& arguments, const char* name) {
  auto it = arguments.find(name);
  if (it == arguments.end()) return InvalidArgument(std::string("missing argument '") + name + "'");
  if (!it->is_string()) return InvalidArgument(std::string("argument '") + name + "' must be a string");
  return it->get<std::string>();
}

// A refused session id, named (quoted as JSON, so no byte of it can forge
// a line) with why it was refused.
Status CheckSession(const std::string& session, Status valid) {
  if (valid.ok()) return valid;
  return Status(valid.code(), "session " + DumpLine(Json(session)) + " is not a valid session id: " +
                                  valid.message());
}

Json TextContent(std::string text) {
  return Json{{"type", "text"}, {"text", std::move(text)}};
}

Json ToolResult(std::string text, Json structured, bool is_error) {
  Json result = Json::object();
  result["content"] = Json::array({TextContent(std::move(text))});
  if (!structured.is_null()) result["structuredContent"] = std::move(structured);
  result["isError"] = is_error;
  return result;
}

}  // namespace

Json ToolList(const ToolCatalog& catalog) {
  Json tools = Json::array();
  Json run_input = Json::object();
  run_input["session"] = SessionProperty(
      "the session id: 1 to 128 characters from A-Z a-z 0-9 . _ -, not starting with '.' or "
      "'-', not 'all'");
  run_input["code"] = StringType("the Python code of the cell");
  run_input["timeout"] = Json{{"type", "number"}, {"exclusiveMinimum", 0},
                              {"description", "seconds before the cell is killed (default: the "
                                              "server's --timeout)"}};
  tools.push_back(Tool(kRunTool, "Run Python", RunDescription(catalog),
                       ObjectSchema(std::move(run_input), Json::array({"session", "code"})),
                       RunOutputSchema(),
                       Json{{"readOnlyHint", false}, {"destructiveHint", false},
                            {"idempotentHint", false}, {"openWorldHint", true}},
                       catalog.structured));

  Json session_info = ObjectSchema(
      Json{{"id", StringType("the session id")},
           {"size_bytes", Json{{"type", "integer"}, {"description", "the checkpoint's size"}}},
           {"last_used", Json{{"type", Json::array({"number", "null"})},
                              {"description", "Unix seconds"}}}},
      Json::array({"id", "size_bytes", "last_used"}), /*closed=*/false);
  tools.push_back(Tool(kSessionsTool, "List sessions",
                       "List the stored sessions, most recently used first: id, size of the "
                       "checkpoint in bytes, last used (Unix seconds).",
                       ObjectSchema(Json::object(), Json::array()),
                       ObjectSchema(Json{{"sessions", Json{{"type", "array"}, {"items", session_info}}}},
                                    Json::array({"sessions"}), /*closed=*/false),
                       Json{{"readOnlyHint", true}, {"openWorldHint", false}}, catalog.structured));

  Json reset_input = Json::object();
  reset_input["session"] = StringType("the session id to forget, or 'all' for every session");
  tools.push_back(Tool(kResetTool, "Reset a session",
                       "Forget a session's state (its variables, imports and checkpoint), or "
                       "every session's with session 'all'. Forgetting a session that does not "
                       "exist is not an error.",
                       ObjectSchema(std::move(reset_input), Json::array({"session"})),
                       ObjectSchema(Json{{"reset", StringType("the session id or 'all'")},
                                         {"removed", Json{{"type", "integer"},
                                                          {"description", "sessions removed"}}}},
                                    Json::array({"reset", "removed"}), /*closed=*/false),
                       Json{{"readOnlyHint", false}, {"destructiveHint", true},
                            {"idempotentHint", true}, {"openWorldHint", false}},
                       catalog.structured));
  return tools;
}

bool IsKnownTool(const std::string& name) {
  return name == kRunTool || name == kSessionsTool || name == kResetTool;
}

StatusOr<RunCall> ParseRunArguments(const Json& arguments) {
  DOLSOT_RETURN_IF_ERROR(CheckArgumentNames(arguments, {"session", "code", "timeout"}));
  RunCall call;
  auto session = RequiredString(arguments, "session");
  if (!session.ok()) return session.status();
  auto code = RequiredString(arguments, "code");
  if (!code.ok()) return code.status();
  call.session = std::move(*session);
  call.code = std::move(*code);
  if (auto it = arguments.find("timeout"); it != arguments.end() && !it->is_null()) {
    if (!it->is_number()) return InvalidArgument("argument 'timeout' must be a number of seconds");
    const double timeout = it->get<double>();
    DOLSOT_RETURN_IF_ERROR(CheckTimeout(timeout, "timeout"));
    call.timeout_seconds = timeout;
  }
  DOLSOT_RETURN_IF_ERROR(CheckSession(call.session, ValidateSessionId(call.session)));
  DOLSOT_RETURN_IF_ERROR(CheckCode(call.code));
  DOLSOT_RETURN_IF_ERROR(ValidateRunRequest(call.session, call.code));
  return call;
}

Status ParseSessionsArguments(const Json& arguments) {
  if (arguments.is_null()) return Status::Ok();
  return CheckArgumentNames(arguments, {});
}

StatusOr<std::string> ParseResetArguments(const Json& arguments) {
  DOLSOT_RETURN_IF_ERROR(CheckArgumentNames(arguments, {"session"}));
  auto session = RequiredString(arguments, "session");
  if (!session.ok()) return session.status();
  DOLSOT_RETURN_IF_ERROR(CheckSession(*session, ValidateResetTarget(*session)));
  return session;
}

Json RunToolResult(const Result& result, bool structured) {
  Json structured_content = nullptr;
  if (structured) {
    structured_content = ResultJsonValue(result);
    structured_content["images"] = result.images.size();
  }
  const bool failed = !result.ok || result.save_error.has_value();
  Json answer = ToolResult(result.Text(), std::move(structured_content), failed);
  for (const std::string& png : result.images) {
    answer["content"].push_back(
        Json{{"type", "image"}, {"data", Base64Encode(png)}, {"mimeType", "image/png"}});
  }
  return answer;
}

Json SessionsToolResult(std::vector<SessionInfo> sessions, double now, bool structured) {
  SortMostRecentFirst(sessions);
  std::string text = sessions.empty() ? "no sessions\n" : SessionsTable(sessions, now);
  Json structured_content = nullptr;
  if (structured) structured_content = Json{{"sessions", SessionsJsonValue(sessions)}};
  return ToolResult(std::move(text), std::move(structured_content), false);
}

Json ResetToolResult(const std::string& target, int removed, bool structured) {
  Json structured_content = nullptr;
  if (structured) structured_content = ResetJsonValue(target, removed);
  return ToolResult(DescribeReset(target, removed), std::move(structured_content), false);
}

Json ToolErrorResult(const std::string& message) {
  return ToolResult(message, nullptr, true);
}

}  // namespace dolsot::cli
