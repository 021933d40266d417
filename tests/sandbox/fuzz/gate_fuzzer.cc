// libFuzzer target for the AST gate (built by clang with ASan + UBSan, see
// tests/sandbox/CMakeLists.txt): CheckCell must terminate on every input with
// well-formed findings; and when the fast path accepts an input, the full path
// must find nothing in it but syntax errors (differential).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sandbox/check_cell.h"
#include "sandbox/prescan.h"

using dolsot::sandbox::Finding;
using dolsot::sandbox::Policy;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Policy policy = [] {
    Policy p = dolsot::sandbox::DefaultPolicy();
    p.AllowToolbox("tb", "tools.api");
    return p;
  }();
  std::string_view code(reinterpret_cast<const char*>(data), size);
  std::vector<Finding> findings = dolsot::sandbox::CheckCell(code, policy);
  if (findings.size() > policy.max_findings + 1) __builtin_trap();
  for (const Finding& finding : findings) {
    bool well_formed = finding.line >= 1 && finding.column >= 1 &&
                       finding.start_byte <= finding.end_byte && finding.end_byte <= size &&
                       !finding.message.empty();
    if (!well_formed) __builtin_trap();
  }
  // CheckCell took the fast path iff it found nothing and the prescan agrees.
  if (findings.empty() && dolsot::sandbox::PrescanProvesAllowed(code, policy)) {
    for (const Finding& finding : dolsot::sandbox::CheckCellFullPath(code, policy)) {
      if (finding.rule != dolsot::sandbox::Rule::kSyntaxError) __builtin_trap();
    }
  }
  return 0;
}
