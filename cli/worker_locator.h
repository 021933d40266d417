// Finds the dolsot-worker executable the CLI's Repl starts for each session.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dolsot::cli {

inline constexpr const char* kWorkerName = "dolsot-worker";

// The places to look, in order, for a CLI at `cli_path`: beside it (a wheel
// installs the CLI and the dolsot-worker console script into the same
// scripts directory), ../libexec/dolsot/ (cmake --install), then
// `build_tree_worker` when given (the build tree).
std::vector<std::string> WorkerCandidates(const std::string& cli_path,
                                          const std::string& build_tree_worker);

// The first candidate that is an executable regular file.
std::optional<std::string> FindWorker(const std::vector<std::string>& candidates);

// The interpreter a script at `path` names on its "#!" line (as pip writes a
// console script such as the wheel's dolsot-worker: "#!/venv/bin/python"),
// when that is an absolute path to an executable python*; "" otherwise (no
// script, unreadable, "#!/usr/bin/env python3", a relative path).
std::string ScriptInterpreter(const std::string& path);

// The running program's path (/proc/self/exe), or "" when unknown.
std::string CurrentExecutablePath();

}  // namespace dolsot::cli
