// The serve command: options and actions.
#include "cli/serve_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "cli/serve_client.h"
#include "cli/serve_paths.h"
#include "cli/serve_server.h"
#include "core/exit_codes.h"

namespace dolsot::cli {

int ServeCommand(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "dolsot serve: the server that keeps sessions live between CLI calls. CLI calls start\n"
      "one by themselves; this runs it in the foreground (for debugging or systemd).",
      "dolsot serve"};
  bool stop = false, status = false, json = false;
  int ready_fd = -1;
  auto* stop_option = app.add_flag("--stop", stop, "Stop the server of DOLSOT_CACHE_DIR and wait until it is gone");
  auto* status_option = app.add_flag("--status", status, "Print its pid, socket, uptime and live sessions");
  stop_option->excludes(status_option);
  app.add_flag("--json", json, "With --stop or --status: one JSON document");
  app.add_option("--ready-fd", ready_fd)->group("");  // set by a client that starts the server
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& error) {
    err << "dolsot: error: " << error.what() << "\nRun 'dolsot serve --help' for usage.\n";
    return kExitUsage;
  }
  if (stop) return StopServer(out, err, json);
  if (status) return PrintServerStatus(out, err, json);
  const EnvLookup env = ProcessEnvironment();
  auto idle = ServeIdleSeconds(env);
  auto max_profiles = ServeMaxProfiles(env);
  if (idle.ok() && !max_profiles.ok()) idle = max_profiles.status();
  auto cache_dir = idle.ok() ? CanonicalCacheDir(env) : StatusOr<std::string>(idle.status());
  auto paths = cache_dir.ok() ? ResolveServePaths(*cache_dir, env) : StatusOr<ServePaths>(cache_dir.status());
  if (!paths.ok()) {
    err << "dolsot: error: " << paths.status().message() << '\n';
    if (ready_fd >= 0) {
      [[maybe_unused]] ssize_t n = ::write(ready_fd, "fail\n", 5);
    }
    return kExitUsage;
  }
  ServerOptions options;
  options.paths = *paths;
  options.idle_seconds = *idle;
  options.max_profiles = *max_profiles;
  options.ready_fd = ready_fd;
  return RunServer(options);
}

}  // namespace dolsot::cli
