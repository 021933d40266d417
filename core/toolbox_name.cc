// Toolbox alias and module-name rules.
#include "core/toolbox_name.h"

#include <string>

#include "core/python_names.h"

namespace dolsot {
namespace {

// An identifier that is no keyword: what an alias or a module name's part is.
bool IsNameNotKeyword(std::string_view name) {
  return IsAsciiIdentifier(name) && !IsPythonKeyword(name);
}

}  // namespace

Status ValidateToolboxAlias(std::string_view alias) {
  if (!IsNameNotKeyword(alias) || alias.substr(0, 2) == "__") {
    return Status(ErrorCode::kInvalidToolbox,
                  "toolbox alias '" + std::string(alias) +
                      "' is not a valid alias (an ASCII Python identifier, not a keyword, "
                      "not starting with '__')");
  }
  if (IsPythonBuiltinName(alias)) {
    return Status(ErrorCode::kInvalidToolbox,
                  "toolbox alias '" + std::string(alias) +
                      "' is a builtin name: the alias would hide the builtin in every cell; "
                      "choose another");
  }
  return Status::Ok();
}

Status ValidateToolboxModule(std::string_view alias, std::string_view module) {
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = module.find('.', start);
    if (!IsNameNotKeyword(module.substr(start, dot - start))) {
      return Status(ErrorCode::kInvalidToolbox,
                    "toolbox '" + std::string(alias) + "': '" + std::string(module) +
                        "' is not an importable module name");
    }
    if (dot == std::string_view::npos) return Status::Ok();
    start = dot + 1;
  }
}

}  // namespace dolsot
