// Formatting of sandbox::Finding for messages and logs.
#include "sandbox/finding.h"

namespace dolsot::sandbox {

std::string FormatFinding(const Finding& finding) {
  std::string out = "line " + std::to_string(finding.line) + ", col " +
                    std::to_string(finding.column) + ": [";
  out += finding.rule_id();
  out += "] ";
  out += finding.message;
  return out;
}

std::string FormatFindings(std::span<const Finding> findings) {
  std::string out;
  for (const Finding& finding : findings) {
    if (!out.empty()) out += '\n';
    out += FormatFinding(finding);
  }
  return out;
}

}  // namespace dolsot::sandbox
