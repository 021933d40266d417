// The three tools `dolsot mcp` offers (run, sessions, reset): their
// descriptions and JSON Schemas, the checks their arguments pass, and the
// CallToolResult each answers with. Pure functions over JSON values; the
// server (cli/mcp_server.h) calls the backend between them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/json_rpc.h"
#include "core/result.h"
#include "core/session_info.h"
#include "core/status.h"

namespace dolsot::cli {

inline constexpr const char* kRunTool = "run";
inline constexpr const char* kSessionsTool = "sessions";
inline constexpr const char* kResetTool = "reset";

// What the tool list says about the server's configuration.
struct ToolCatalog {
  std::map<std::string, std::string> toolboxes;  // alias -> module
  // Output schemas and structured content exist from protocol 2025-06-18 on.
  bool structured = true;
};

// The tools/list result's "tools" array.
Json ToolList(const ToolCatalog& catalog);
// True for "run", "sessions" and "reset".
bool IsKnownTool(const std::string& name);

// A checked run call.
struct RunCall {
  std::string session;
  std::string code;
  std::optional<double> timeout_seconds;
};

// Each tool's arguments, checked as strictly as its inputSchema says (no
// unknown names, the right types, a valid session id, code within
// kMaxCodeBytes without NUL bytes, a positive timeout). The error names the
// argument and what is wrong: the server returns it as a tool error (isError),
// which a model can read and correct.
StatusOr<RunCall> ParseRunArguments(const Json& arguments);
Status ParseSessionsArguments(const Json& arguments);
StatusOr<std::string> ParseResetArguments(const Json& arguments);  // a session id or "all"

// CallToolResults. content[0] is the agent-readable text; structuredContent
// (when the catalog is structured) follows the tool's outputSchema.
// run: Result.Text(), then each figure as an image block (base64 PNG);
// structuredContent is the --json document with "images" the number of
// image blocks; isError when the cell failed or its state was not saved.
Json RunToolResult(const Result& result, bool structured);
// sessions: the --list-sessions table (or "no sessions"); {"sessions": [...]}.
Json SessionsToolResult(std::vector<SessionInfo> sessions, double now, bool structured);
// reset: "removed session s"...; {"reset", "removed"}.
Json ResetToolResult(const std::string& target, int removed, bool structured);
// A request that could not run: isError, the message as text, no structured content.
Json ToolErrorResult(const std::string& message);

}  // namespace dolsot::cli
