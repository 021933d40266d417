// What the type gate is asked and what it answers: a cell with its toolboxes
// and session names in, ty's diagnostics about toolbox calls out.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dolsot {

struct TypeDiagnostic {
  std::string rule;     // ty's rule name, e.g. "invalid-argument-type"
  std::string message;  // one line
  int line = 0;         // 1-based, in the cell
  int column = 0;       // 1-based, in code points
};

struct TypeCheckRequest {
  std::string_view code;
  std::map<std::string, std::string> toolboxes;  // alias -> module name
  std::vector<std::string> session_names;        // names earlier cells bound
  std::string ty_bin = "ty";                     // a path, or a name looked up on PATH
  std::vector<std::string> python_path;          // where toolbox modules are found
  std::string python_executable;                 // the interpreter ty resolves against
  // Past it the gate fails open; the default (epoch) means now + the default
  // cell timeout (core/config.h).
  std::chrono::steady_clock::time_point deadline;
};

struct TypeCheckOutcome {
  bool ran = false;  // false: ty skipped, missing, failed or late (the gate failed open)
  std::vector<TypeDiagnostic> diagnostics;
  std::string note;  // why it did not run, for logs
  // "type gate: line 3, col 5: ..." lines, for Result.error.
  std::string FormatError() const;
};

}  // namespace dolsot
