// CellPipeline: the gates in their one order, and the rejected cell's Result.
#include "core/cell_pipeline.h"

namespace dolsot {

CellPipeline::CellPipeline(GateSet gates) : warm_up_(std::move(gates.type_gate_warm_up)) {
  if (gates.ast_gate) stages_.push_back({"the AST gate", std::move(gates.ast_gate)});
  if (gates.type_gate) stages_.push_back({"the type gate", std::move(gates.type_gate)});
  if (gates.caller_gate) stages_.push_back({"the gate", std::move(gates.caller_gate)});
}

void CellPipeline::WarmUp(const GateRequest& request) const {
  if (warm_up_) warm_up_(request);
}

std::optional<Result> CellPipeline::Admit(const GateRequest& request, GateMemory* learned) const {
  for (const Stage& stage : stages_) {
    GateVerdict verdict = stage.gate(request);
    if (verdict.allowed) {
      if (learned != nullptr) learned->Merge(verdict.learned);
      continue;
    }
    std::string why = verdict.message.empty()
                          ? std::string("rejected by ") + stage.name + " (it gave no reason)"
                          : std::move(verdict.message);
    return Result::Failure(Outcome::kRejected, kExitFailure, std::move(why), request.held);
  }
  return std::nullopt;
}

}  // namespace dolsot
