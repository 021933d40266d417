// The names command: options and action.
#include "cli/names_command.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/exit_codes.h"
#include "core/session_id.h"

namespace dolsot::cli {

CLI::Option* AddNamesOptions(CLI::App& app, NamesArgs& args) {
  return app.add_option("--names", args.session,
                        "Print the names session SID holds, running nothing in it, and exit")
      ->type_name("SID");
}

std::string SourceName(SessionNames::Source source) {
  switch (source) {
    case SessionNames::Source::kLive: return "live";
    case SessionNames::Source::kCheckpoint: return "checkpoint";
    case SessionNames::Source::kNone: break;
  }
  return "none";
}

int NamesCommand(const NamesArgs& args, const CommandContext& context) {
  const std::string sid = args.session.value_or("");
  if (Status valid = ValidateSessionId(sid); !valid.ok()) return ReportError(context.err, valid);
  if (!context.session_names) {
    return ReportError(context.err, Status(ErrorCode::kInternal, "--names is not available here"));
  }
  auto names = context.session_names(sid);
  if (!names.ok()) return ReportError(context.err, names.status());
  if (context.json) {
    nlohmann::ordered_json doc = nlohmann::ordered_json::object();
    doc["session"] = sid;
    doc["names"] = names->names;
    doc["source"] = SourceName(names->source);
    context.out << doc.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
                << '\n';
  } else {
    for (const std::string& name : names->names) context.out << name << '\n';
  }
  context.out.flush();
  return kExitOk;
}

}  // namespace dolsot::cli
