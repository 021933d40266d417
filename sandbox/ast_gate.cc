// MakeAstGate: wraps sandbox::CheckCell as a core CellGate.
#include "sandbox/ast_gate.h"

#include <memory>
#include <utility>

namespace dolsot {

CellGate MakeAstGate() { return MakeAstGate(sandbox::DefaultPolicy()); }

CellGate MakeAstGate(sandbox::Policy policy) {
  auto shared = std::make_shared<const sandbox::Policy>(std::move(policy));
  return [shared](std::string_view code) {
    std::vector<sandbox::Finding> findings = sandbox::CheckCell(code, *shared);
    GateVerdict verdict;
    verdict.allowed = findings.empty();
    verdict.message = sandbox::FormatFindings(findings);
    return verdict;
  };
}

}  // namespace dolsot
