// CpythonOracleProcess: the AST gate's statement oracle (Policy::
// statement_oracle) for a host that embeds no CPython, such as the dolsot
// CLI: one long-lived child running `python -I -S` that parses each cell with
// CPython's own parser (ast, PyCF_ONLY_AST) and answers where its statements
// start. The interpreter is the one the sessions' cells run on, so the gate
// compares tree-sitter's reading with the reading of the parser that will
// run the cell (3.10 and 3.13 read some cells differently).
//
// Failure, as an attacker typing cells would try it:
//   - the interpreter cannot be started (missing, not Python): kUnavailable,
//     so the gate keeps only the tree's own checks (Policy's contract for an
//     oracle with no interpreter at hand);
//   - CPython cannot parse the cell (SyntaxError, too deep, too big, NUL
//     bytes): kInvalidArgument with CPython's message; the gate refuses it;
//   - the child dies, hangs past its deadline or answers garbage on a cell
//     it had started: kInvalidArgument too (the cell is refused, never let
//     through unchecked); the child is killed and reaped, and the next cell
//     gets a fresh one.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sandbox/policy.h"

namespace dolsot::sandbox {

class CpythonOracleProcess {
 public:
  using Clock = std::chrono::steady_clock;

  // `python`: the interpreter's path. Nothing is started until the first
  // question (Start() starts it early, e.g. while the worker starts).
  explicit CpythonOracleProcess(std::string python,
                                std::chrono::milliseconds deadline = std::chrono::seconds(30));
  ~CpythonOracleProcess();  // kills and reaps the child, if any
  CpythonOracleProcess(const CpythonOracleProcess&) = delete;
  CpythonOracleProcess& operator=(const CpythonOracleProcess&) = delete;

  // Starts the child now unless it runs, without waiting for it to be
  // ready. kUnavailable when it cannot be spawned.
  Status Start();
  // CPython's statement starts for `code`, sorted. Thread-safe (one question
  // at a time). See the header comment for the errors.
  StatusOr<std::vector<StatementStart>> StatementStarts(std::string_view code);
  // The child's pid, or -1 when none runs (tests).
  int pid() const;

 private:
  class Child;
  Status StartLocked();
  Status AwaitReadyLocked();
  StatusOr<std::vector<StatementStart>> AskLocked(std::string_view code);

  std::string python_;
  std::chrono::milliseconds deadline_;
  mutable std::mutex mutex_;
  std::unique_ptr<Child> child_;
};

// A Policy::statement_oracle served by one CpythonOracleProcess for
// `python`, shared by every copy of the returned function; the child is
// started at once (its start overlaps whatever the host does next) and ends
// with the last copy. An empty `python`: no oracle (an empty function).
StatementOracle MakeCpythonProcessOracle(std::string python);

}  // namespace dolsot::sandbox
