// The list command: options and action.
#include "cli/list_sessions_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>

#include "core/exit_codes.h"
#include "cli/json_writer.h"
#include "cli/table.h"

namespace dolsot::cli {

CLI::Option* AddListSessionsOptions(CLI::App& app, ListSessionsArgs& args) {
  return app.add_flag("-l,--list-sessions", args.requested,
                      "List stored sessions (id, size, last used) and exit");
}

void SortMostRecentFirst(std::vector<SessionInfo>& sessions) {
  std::sort(sessions.begin(), sessions.end(), [](const SessionInfo& a, const SessionInfo& b) {
    return a.last_used != b.last_used ? a.last_used > b.last_used : a.id < b.id;
  });
}

int ListSessionsCommand(const ListSessionsArgs& args, const CommandContext& context) {
  auto backend = context.open_backend(BackendSettings{});
  if (!backend.ok()) return ReportSetupError(context.err, backend.status());
  auto sessions = (*backend)->Sessions();
  Status closed = (*backend)->Close();
  if (!sessions.ok()) return ReportError(context.err, sessions.status());
  SortMostRecentFirst(*sessions);
  if (context.json) {
    context.out << SessionsToJson(*sessions) << '\n';
  } else if (sessions->empty()) {
    context.out << "no sessions\n";
  } else {
    context.out << SessionsTable(*sessions, context.now());
  }
  context.out.flush();
  if (!closed.ok()) context.err << "dolsot: warning: " << closed.message() << '\n';
  return kExitOk;
}

}  // namespace dolsot::cli
