// The ty type gate as a CellPipeline stage: one warm `ty server` shared by the
// gate and its warm-up, which both backends add to their GateSet the same way.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/cell_pipeline.h"

namespace dolsot {

struct TypeGateSettings {
  std::map<std::string, std::string> toolboxes;  // alias -> module name
  std::string ty_bin = "ty";
  std::vector<std::string> python_path;  // where toolbox modules are found
  std::string python_executable;         // the interpreter ty resolves against
};

// Sets gates.type_gate and gates.type_gate_warm_up. Without toolboxes there
// is nothing to check against, and nothing is set. The gate fails open (ty
// missing, failing or out of the cell's time: the cell runs).
void AddTypeGate(GateSet& gates, TypeGateSettings settings);

}  // namespace dolsot
