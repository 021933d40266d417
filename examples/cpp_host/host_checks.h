// What both example hosts share: run a cell through the Backend interface and
// print what an agent would read; count the checks that do not hold.
#pragma once

#include <cstdio>
#include <string>

#include "core/backend.h"

namespace host_checks {

inline int failures = 0;

inline void Expect(bool condition, const std::string& what) {
  std::printf("%s: %s\n", condition ? "ok" : "MISMATCH", what.c_str());
  if (!condition) ++failures;
}

// Runs one cell in session "agent" and prints it with its result.
inline dolsot::Result Run(dolsot::Backend& backend, const char* code) {
  dolsot::StatusOr<dolsot::Result> result = backend.Run("agent", code, {});
  if (!result.ok()) {
    std::printf("error: %s\n", result.status().ToString().c_str());
    ++failures;
    return {};
  }
  std::printf(">>> %s\n%s\n", code, result->Text().c_str());
  return *result;
}

}  // namespace host_checks
