// Finds the dolsot-worker executable the CLI's Repl starts for each session.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dolsot::cli {

inline constexpr const char* kWorkerName = "dolsot-worker";

// The places to look, in order, for a CLI at `cli_path`: beside it (a wheel
// installs both into the venv's bin/), ../libexec/dolsot/ (cmake --install),
// then `build_tree_worker` when given (the build tree).
std::vector<std::string> WorkerCandidates(const std::string& cli_path,
                                          const std::string& build_tree_worker);

// The first candidate that is an executable regular file.
std::optional<std::string> FindWorker(const std::vector<std::string>& candidates);

// The running program's path (/proc/self/exe), or "" when unknown.
std::string CurrentExecutablePath();

}  // namespace dolsot::cli
