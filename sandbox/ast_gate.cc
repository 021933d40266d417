// MakeAstGate: wraps sandbox::CheckCell as a core CellGate.
#include "sandbox/ast_gate.h"

#include <memory>
#include <utility>

namespace dolsot {

CellGate MakeAstGate() { return MakeAstGate(sandbox::DefaultPolicy()); }

CellGate MakeAstGate(sandbox::Policy policy) {
  auto shared = std::make_shared<const sandbox::Policy>(std::move(policy));
  return [shared](const GateRequest& request) {
    // No memory from the backend: assume the worst (earlier cells unknown).
    static const GateMemory kUnknown{{}, {}, /*complete=*/false};
    const GateMemory& memory = request.memory != nullptr ? *request.memory : kUnknown;
    GateVerdict verdict;
    std::vector<sandbox::Finding> findings =
        sandbox::CheckSessionCell(request.code, *shared, memory, &verdict.learned);
    verdict.allowed = findings.empty();
    if (!verdict.allowed) verdict.learned = GateMemory();
    // The same header the Python gate adapter uses (bindings/gate_from_python.cc).
    if (!verdict.allowed) verdict.message = "rejected by the gate:\n" + sandbox::FormatFindings(findings);
    return verdict;
  };
}

}  // namespace dolsot
