// The gate's entry points (see check_cell.h): each checks one cell with a
// CellChecker of its own (cell_checker.h).
#include "sandbox/check_cell.h"

#include "sandbox/cell_checker.h"

namespace dolsot::sandbox {

std::vector<Finding> CheckCell(std::string_view code, const Policy& policy) {
  return CellChecker(code, policy).Run(/*fast_path=*/true);
}

std::vector<Finding> CheckCellFullPath(std::string_view code, const Policy& policy) {
  return CellChecker(code, policy).Run(/*fast_path=*/false);
}

std::vector<Finding> CheckSessionCell(std::string_view code, const Policy& policy,
                                      const GateMemory& memory, GateMemory* learned) {
  return CellChecker(code, policy, &memory, learned).Run(/*fast_path=*/true);
}

std::vector<Finding> CheckSessionCellFullPath(std::string_view code, const Policy& policy,
                                              const GateMemory& memory, GateMemory* learned) {
  return CellChecker(code, policy, &memory, learned).Run(/*fast_path=*/false);
}

}  // namespace dolsot::sandbox
