// TypeCheckOutcome's formatting for Result.error.
#include "typecheck/type_check.h"

namespace dolsot {

std::string TypeCheckOutcome::FormatError() const {
  std::string out;
  for (const TypeDiagnostic& d : diagnostics) {
    if (!out.empty()) out += '\n';
    out += "type gate: line " + std::to_string(d.line) + ", col " + std::to_string(d.column) +
           ": " + d.message + " [" + d.rule + "]";
  }
  return out;
}

}  // namespace dolsot
