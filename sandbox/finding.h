// sandbox::Finding: one reason the gate rejects a cell, located in the source.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "sandbox/rules.h"

namespace dolsot::sandbox {

struct Finding {
  Rule rule = Rule::kSyntaxError;
  std::string message;      // says what was found and why it is denied
  std::uint32_t line = 1;   // 1-based
  std::uint32_t column = 1; // 1-based, in code points
  std::uint32_t start_byte = 0;  // the exact span [start_byte, end_byte) of the source
  std::uint32_t end_byte = 0;

  std::string_view rule_id() const { return RuleId(rule); }
};

// "line 3, col 5: [rule-id] message"
std::string FormatFinding(const Finding& finding);
// One FormatFinding line per finding, joined by '\n'.
std::string FormatFindings(std::span<const Finding> findings);

}  // namespace dolsot::sandbox
