// sandbox::Policy: the default policy and the module allow-list lookup.
#include "sandbox/policy.h"

#include "sandbox/rules.h"

namespace dolsot::sandbox {

void Policy::AllowToolbox(std::string alias, std::string module) {
  toolbox_aliases.insert(std::move(alias));
  if (!module.empty()) allowed_modules.insert(std::move(module));
}

bool Policy::IsModuleAllowed(std::string_view dotted_module) const {
  // `a.b.c` is allowed when `a.b.c`, `a.b` or `a` is allowed (or is an alias).
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
