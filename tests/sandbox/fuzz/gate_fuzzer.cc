// libFuzzer target for the AST gate (built by clang with ASan + UBSan, see
// tests/sandbox/CMakeLists.txt): CheckCell must terminate on every input with
// well-formed findings; and when the fast path accepts an input, the full path
// must find nothing in it but syntax errors (differential). The same for one
// cell of a session whose gate memory holds sealed names (CheckSessionCell).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "sandbox/check_cell.h"
#include "sandbox/prescan.h"

using dolsot::sandbox::Finding;
using dolsot::sandbox::Policy;

namespace {

void CheckWellFormed(const std::vector<Finding>& findings, const Policy& policy, std::size_t size) {
  if (findings.size() > policy.max_findings + 1) __builtin_trap();
  for (const Finding& finding : findings) {
    bool well_formed = finding.line >= 1 && finding.column >= 1 &&
                       finding.start_byte <= finding.end_byte && finding.end_byte <= size &&
                       !finding.message.empty();
    if (!well_formed) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Policy policy = [] {
    Policy p = dolsot::sandbox::DefaultPolicy();
    p.AllowToolbox("tb", "tools.api");
    return p;
  }();
  std::string_view code(reinterpret_cast<const char*>(data), size);
  std::vector<Finding> findings = dolsot::sandbox::CheckCell(code, policy);
  CheckWellFormed(findings, policy, size);
  // CheckCell took the fast path iff it found nothing and the prescan agrees.
  if (findings.empty() && dolsot::sandbox::PrescanProvesAllowed(code, policy)) {
    for (const Finding& finding : dolsot::sandbox::CheckCellFullPath(code, policy)) {
      if (finding.rule != dolsot::sandbox::Rule::kSyntaxError) __builtin_trap();
    }
  }
  // A later cell of a session that sealed `A` (method `m`) and `Node`.
  static const dolsot::GateMemory memory = [] {
    dolsot::GateMemory m;
    m.sealed_classes = {"A", "Node"};
    m.sealed_methods = {"m", "walk"};
    return m;
  }();
  dolsot::GateMemory learned;
  std::vector<Finding> session = dolsot::sandbox::CheckSessionCell(code, policy, memory, &learned);
  CheckWellFormed(session, policy, size);
  if (session.empty()) {
    dolsot::GateMemory learned_full;
    for (const Finding& finding :
         dolsot::sandbox::CheckSessionCellFullPath(code, policy, memory, &learned_full)) {
      if (finding.rule != dolsot::sandbox::Rule::kSyntaxError) __builtin_trap();
    }
  }
  return 0;
}
