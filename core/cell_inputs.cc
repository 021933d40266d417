// Validation of a cell's tools and variables.
#include "core/cell_inputs.h"

#include <set>

#include "core/python_names.h"

namespace dolsot {
namespace {

Status CheckName(std::string_view what, std::string_view name) {
  std::string quoted = std::string(what) + " name '" + std::string(name) + "'";
  if (!IsAsciiIdentifier(name)) {
    return InvalidArgument(quoted + " is not an ASCII Python identifier");
  }
  if (IsPythonKeyword(name)) return InvalidArgument(quoted + " is a Python keyword");
  if (name.size() >= 2 && name.substr(0, 2) == "__") {
    return InvalidArgument(quoted + " starts with '__' (dunder names are the interpreter's)");
  }
  if (IsPythonBuiltinName(name)) {
    return InvalidArgument(quoted + " would replace the Python builtin of that name");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateCellInputs(const CellTools& tools, const std::vector<CellVariable>& variables) {
  std::set<std::string_view> seen;
  for (const std::string& name : tools.names) {
    DOLSOT_RETURN_IF_ERROR(CheckName("tool", name));
    if (!seen.insert(name).second) return InvalidArgument("tool '" + name + "' is given twice");
  }
  if (!tools.final_name.empty()) {
    DOLSOT_RETURN_IF_ERROR(CheckName("final-answer function", tools.final_name));
    if (seen.count(tools.final_name) != 0) {
      return InvalidArgument("'" + tools.final_name +
                             "' is both a tool and the final-answer function");
    }
  }
  std::set<std::string_view> bound;
  for (const CellVariable& variable : variables) {
    DOLSOT_RETURN_IF_ERROR(CheckName("variable", variable.name));
    if (!bound.insert(variable.name).second) {
      return InvalidArgument("variable '" + variable.name + "' is given twice");
    }
  }
  return Status::Ok();
}

std::vector<std::string> NamesInScope(const std::vector<std::string>& held, const CellTools& tools,
                                      const std::vector<CellVariable>& variables) {
  std::vector<std::string> names = held;
  for (const CellVariable& variable : variables) names.push_back(variable.name);
  names.insert(names.end(), tools.names.begin(), tools.names.end());
  if (!tools.final_name.empty()) names.push_back(tools.final_name);
  return names;
}

}  // namespace dolsot
