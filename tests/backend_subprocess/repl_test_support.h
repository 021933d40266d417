// Helpers shared by the Repl test suites: a Repl for tests, a run that must
// not be refused, and the process table (for "nothing left behind" checks).
#pragma once

#include <sys/types.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "backend_subprocess/repl.h"
#include "core/memory_store.h"

namespace dolsot::repl_testing {

// A Repl with the type gate off and a 30 s default timeout; `store` defaults
// to a fresh MemoryStore.
inline std::unique_ptr<Repl> MakeTestRepl(bool snapshots, CheckpointMode mode,
                                          std::shared_ptr<SessionStore> store = nullptr) {
  ReplOptions options;
  options.store = store ? std::move(store) : std::make_shared<MemoryStore>();
  options.snapshots = snapshots;
  options.checkpoint = mode;
  options.config.typecheck = false;
  options.config.timeout_seconds = 30;
  auto repl = Repl::Create(std::move(options));
  EXPECT_TRUE(repl.ok()) << repl.status().ToString();
  return std::move(repl).value();
}

// Runs a cell that the Repl must accept (the cell itself may still fail).
// `timeout` nullopt: the Repl's own.
inline Result MustRun(Repl& repl, std::string_view sid, std::string_view code,
                      std::optional<double> timeout = std::nullopt) {
  RunOptions options;
  options.timeout_seconds = timeout;
  auto r = repl.Run(sid, code, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : Result{};
}

// One line of the process table.
struct ProcEntry {
  pid_t pid;
  pid_t ppid;
  char state;  // as in /proc/<pid>/stat: 'Z' for a zombie, ...
};

// Every process /proc shows now (those that vanish while read are skipped).
inline std::vector<ProcEntry> ReadProcTable() {
  std::vector<ProcEntry> out;
  for (auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    auto close = text.rfind(')');  // the command name may hold spaces and ')'
    if (close == std::string::npos) continue;
    char state;
    long ppid;
    std::istringstream rest(text.substr(close + 1));
    if (!(rest >> state >> ppid)) continue;
    out.push_back({static_cast<pid_t>(std::stoi(name)), static_cast<pid_t>(ppid), state});
  }
  return out;
}

}  // namespace dolsot::repl_testing
