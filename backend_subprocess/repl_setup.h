// What a Repl is made from, checked before it exists: its options
// validated (toolbox names, max_live_sessions, the Sandbox's policy and
// mounts), its configuration resolved, its store opened, and the host paths
// its Sandbox keeps hidden. Everything here is refused as an error value
// where the Repl is made (Repl::Create), never at a first cell.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend_subprocess/repl.h"
#include "core/config.h"
#include "core/session_store.h"
#include "core/status.h"

namespace dolsot {

struct ReplSetup {
  Config config;
  std::shared_ptr<SessionStore> store;  // options.store, or a FileStore of the cache dir
};

// Checks `options` and resolves what the Repl needs; kConfig/kInvalidArgument
// naming the problem. A Sandbox mount the worker would refuse (one showing
// the store, the cache dir or the worker's cwd, a read-write one holding
// them, an overlay of a file, a symlink on a host path) is refused here.
StatusOr<ReplSetup> CheckReplOptions(const ReplOptions& options);

// kInvalidArgument unless `max_live_sessions` >= 1 (at Create, and when a
// running Repl's limit is changed).
Status CheckMaxLiveSessions(int max_live_sessions);

// Where the worker runs: options.worker_directory, else this process's cwd.
std::string WorkerDirectory(const ReplOptions& options);

// The host paths a Sandbox of this Repl keeps out of sight: the cache dir,
// the worker's cwd and a file store's own directory.
std::vector<std::string> SandboxHiddenPaths(const Config& config, const std::string& cwd,
                                            const SessionStore& store);

}  // namespace dolsot
