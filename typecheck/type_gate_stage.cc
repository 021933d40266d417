// AddTypeGate: TypeGateSettings -> a CellGate over one shared TyServer.
#include "typecheck/type_gate_stage.h"

#include <memory>

#include "typecheck/ty_server.h"

namespace dolsot {
namespace {

TypeCheckRequest RequestFor(const TypeGateSettings& settings, const GateRequest& gate) {
  TypeCheckRequest request;
  request.code = gate.code;
  request.toolboxes = settings.toolboxes;
  request.session_names = gate.held;
  request.ty_bin = settings.ty_bin;
  request.python_path = settings.python_path;
  request.python_executable = settings.python_executable;
  request.deadline = gate.deadline;
  return request;
}

}  // namespace

void AddTypeGate(GateSet& gates, TypeGateSettings settings) {
  if (settings.toolboxes.empty()) return;
  auto server = std::make_shared<TyServer>();
  auto shared = std::make_shared<const TypeGateSettings>(std::move(settings));
  gates.type_gate = [server, shared](const GateRequest& gate) {
    TypeCheckOutcome outcome = server->Check(RequestFor(*shared, gate));
    GateVerdict verdict;
    if (outcome.ran && !outcome.diagnostics.empty()) {
      verdict.allowed = false;
      verdict.message = outcome.FormatError();
    }
    return verdict;
  };
  gates.type_gate_warm_up = [server, shared](const GateRequest& gate) {
    server->Prefetch(RequestFor(*shared, gate));
  };
}

}  // namespace dolsot
