// sandbox::Policy: the default policy and the module allow-list lookup.
#include "sandbox/policy.h"

#include "sandbox/rules.h"

namespace dolsot::sandbox {

void Policy::AllowToolbox(std::string alias, std::string module) {
  toolbox_aliases.insert(std::move(alias));
  if (module.empty()) return;
  toolbox_modules.insert(module);
  allowed_modules.insert(std::move(module));
}

bool Policy::IsModuleAllowed(std::string_view dotted_module) const {
  // `a.b.c` is allowed when `a.b.c`, `a.b` or `a` is allowed (or is an alias).
  // A denied submodule (json.tool) only when the host lists it itself.
  for (std::string_view path = dotted_module; !path.empty();) {
    if (IsDeniedModulePath(path) && !allowed_modules.contains(path)) return false;
    std::size_t dot = path.rfind('.');
    path = dot == std::string_view::npos ? std::string_view() : path.substr(0, dot);
  }
  std::string_view prefix = dotted_module;
  while (!prefix.empty()) {
    if (allowed_modules.contains(prefix) || toolbox_aliases.contains(prefix)) return true;
    std::size_t dot = prefix.rfind('.');
    if (dot == std::string_view::npos) break;
    prefix = prefix.substr(0, dot);
  }
  return false;
}

Policy DefaultPolicy() {
  Policy policy;
  for (std::string_view module : DefaultAllowedModules()) policy.allowed_modules.emplace(module);
  for (std::string_view dunder : DefaultAllowedDunders()) policy.allowed_dunders.emplace(dunder);
  return policy;
}

}  // namespace dolsot::sandbox
