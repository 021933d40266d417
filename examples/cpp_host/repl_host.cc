// A C++ host of dolsot's Repl: no CPython in this process at all. Cells run
// in session processes forked from the installed dolsot-worker, which the
// Repl finds by itself (the prefix find_package(dolsot) found). The host keeps
// a session's state across cells, survives a runaway cell (killed at its
// deadline, the session rolled back), and holds the Repl as a Backend past
// Create. Prints the worker it uses; exits non-zero on any mismatch.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backend_subprocess/repl.h"
#include "backend_subprocess/worker_process.h"
#include "core/backend.h"
#include "core/memory_store.h"
#include "host_checks.h"

using host_checks::Expect;
using host_checks::Run;

int main() {
  // What ReplOptions' empty worker_command stands for.
  std::vector<std::string> worker = dolsot::DefaultWorkerCommand();
  std::printf("worker: %s\n", worker.empty() ? "" : worker.front().c_str());

  dolsot::ReplOptions options;
  options.store = std::make_shared<dolsot::MemoryStore>();
  options.config.timeout_seconds = 5;
  options.config.typecheck = false;  // no ty needed here
  auto created = dolsot::Repl::Create(std::move(options));
  if (!created.ok()) {
    std::printf("cannot create the Repl: %s\n", created.status().ToString().c_str());
    return 2;
  }
  std::unique_ptr<dolsot::Backend> backend = std::move(created).value();
  dolsot::Backend& repl = *backend;
  Expect(repl.capabilities().hard_timeout, "this backend stops a runaway cell by force");

  dolsot::Result first = Run(repl, "total = sum(range(10))\ntotal");
  Expect(first.ok && first.value == "45", "a cell runs in the installed worker");
  dolsot::Result second = Run(repl, "total += 1\nprint('now', total)");
  Expect(second.ok && second.stdout_text == "now 46\n", "the session keeps its state");
  dolsot::Result runaway = Run(repl, "total = 0\nwhile True: pass");
  Expect(runaway.outcome() == dolsot::Outcome::kTimeout, "a runaway cell is stopped");
  dolsot::Result after = Run(repl, "total");
  Expect(after.ok && after.value == "46", "and the session is rolled back to before it");
  dolsot::Result python = Run(repl, "import sys\nsys.version_info[:2]");
  Expect(python.ok && python.value && python.value->rfind("(3, ", 0) == 0,
         "cells run in a real CPython 3");

  Expect(repl.Close().ok(), "the Repl closes (its worker reaped)");
  const bool passed = host_checks::failures == 0;
  std::printf("%s\n", passed ? "repl_host: all checks passed" : "repl_host: FAILED");
  return passed ? 0 : 1;
}
