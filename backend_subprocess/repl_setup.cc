// A Repl's options checked before it exists (see repl_setup.h).
#include "backend_subprocess/repl_setup.h"

#include <unistd.h>

#include <string_view>

#include "core/file_store.h"
#include "core/toolbox_name.h"
#include "sandbox/bind_source.h"
#include "sandbox/sandbox_mount_check.h"

namespace dolsot {
namespace {

std::string CurrentDirectory() {
  std::string buf(4096, '\0');
  if (::getcwd(buf.data(), buf.size()) == nullptr) return ".";
  buf.resize(std::char_traits<char>::length(buf.c_str()));
  return buf;
}

// A file store's own directory ("" for any other store).
std::string StoreDirectory(const SessionStore& store) {
  const auto* files = dynamic_cast<const FileStore*>(&store);
  return files != nullptr ? files->directory() : std::string();
}

}  // namespace

std::string WorkerDirectory(const ReplOptions& options) {
  return options.worker_directory.empty() ? CurrentDirectory() : options.worker_directory;
}

std::vector<std::string> SandboxHiddenPaths(const Config& config, const std::string& cwd,
                                            const SessionStore& store) {
  std::vector<std::string> paths;
  for (const HiddenHostPath& hidden : ReplHiddenPaths(config.cache_dir, cwd, StoreDirectory(store))) {
    paths.push_back(hidden.path);
  }
  return paths;
}

Status CheckMaxLiveSessions(int max_live_sessions) {
  if (max_live_sessions < 1) {
    return InvalidArgument("max_live_sessions must be at least 1, got " +
                           std::to_string(max_live_sessions));
  }
  return Status::Ok();
}

StatusOr<ReplSetup> CheckReplOptions(const ReplOptions& options) {
  for (const auto& [alias, module] : options.toolboxes) {
    DOLSOT_RETURN_IF_ERROR(ValidateToolboxAlias(alias));
    DOLSOT_RETURN_IF_ERROR(ValidateToolboxModule(alias, module));
  }
  DOLSOT_RETURN_IF_ERROR(CheckMaxLiveSessions(options.max_live_sessions));
  if (options.sandbox) {
    DOLSOT_RETURN_IF_ERROR(ValidateSandboxPolicy(*options.sandbox));
    DOLSOT_RETURN_IF_ERROR(CheckMountSources(options.sandbox->mounts));
  }
  auto config = ResolveConfig(options.config);
  if (!config.ok()) return config.status();
  ReplSetup setup{std::move(config).value(), options.store};
  if (!setup.store) {
    auto opened = FileStore::Open(setup.config.cache_dir, setup.config.ttl_days);
    if (!opened.ok()) return opened.status();
    setup.store = std::move(opened).value();
  }
  if (options.sandbox) {
    // The worker checks all of it again when it builds its root, with the
    // same functions; here it is a configuration error (the CLI's exit 2)
    // rather than a worker that fails at the first cell.
    DOLSOT_RETURN_IF_ERROR(CheckSandboxMounts(
        options.sandbox->mounts, ReplHiddenPaths(setup.config.cache_dir, WorkerDirectory(options),
                                                 StoreDirectory(*setup.store))));
  }
  return setup;
}

}  // namespace dolsot
