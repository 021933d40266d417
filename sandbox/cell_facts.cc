// CellFacts: bindings, classes and alias chains of one cell, resolved once the
// walk is over (see cell_facts.h).
#include "sandbox/cell_facts.h"

#include <utility>

#include "sandbox/rules.h"

namespace dolsot::sandbox {

void CellFacts::NoteBinding(std::string_view name, std::uint32_t start, Source source,
                            std::int32_t class_index) {
  auto it = bindings_.find(name);
  if (it == bindings_.end()) it = bindings_.emplace(std::string(name), Binding{}).first;
  Binding& binding = it->second;
  if (++binding.count == 1) {
    binding.start = start;
    binding.source = source;
    binding.class_index = class_index;
  }
}

std::int32_t CellFacts::AddClass(std::string name, std::uint32_t start, bool top_level,
                                 bool plain, std::vector<Base> bases) {
  classes_.push_back(ClassInfo{std::move(name), start, top_level, plain, std::move(bases)});
  return static_cast<std::int32_t>(classes_.size() - 1);
}

bool CellFacts::BaseIsOwn(const Base& base, std::uint32_t class_start) {
  if (base.bare && IsBuiltinName(base.root) && !bindings_.contains(base.root)) {
    // A builtin's module-level name cannot be rebound (rebind-builtin), so it
    // is the builtin. `type` makes metaclasses; exception groups are refused.
    return base.root != "type" && base.root != "ExceptionGroup" &&
           base.root != "BaseExceptionGroup";
  }
  auto it = bindings_.find(base.root);
  if (it == bindings_.end()) return false;  // bound in an earlier cell: unknown
  const Binding& binding = it->second;
  if (binding.count != 1 || binding.start >= class_start) return false;
  if (binding.source == Source::kSafeImport) return true;
  return binding.source == Source::kClass && base.bare && ClassIsOwn(binding.class_index);
}

bool CellFacts::ClassIsOwn(std::int32_t index) {
  if (index < 0 || static_cast<std::size_t>(index) >= classes_.size()) return false;
  ClassInfo& info = classes_[static_cast<std::size_t>(index)];
  if (info.own >= 0) return info.own == 1;
  if (info.own == -2) return false;  // a cycle cannot happen in order; fail closed
  info.own = -2;
  bool own = info.top_level && info.plain;
  // classes_ does not grow while deciding, so `info` stays valid.
  for (std::size_t i = 0; own && i < info.bases.size(); ++i) {
    own = BaseIsOwn(info.bases[i], info.start);
  }
  info.own = own ? 1 : 0;
  return own;
}

void CellFacts::NoteAlias(std::string target, std::string source) {
  aliases_.emplace_back(std::move(target), std::move(source));
}

NameSet CellFacts::ResolveAliases(NameSet seeds) const {
  bool changed = !seeds.empty();
  while (changed) {  // at most one pass per alias: each pass adds a name
    changed = false;
    for (const auto& [target, source] : aliases_) {
      if (seeds.contains(source) && !seeds.contains(target)) {
        seeds.insert(target);
        changed = true;
      }
    }
  }
  return seeds;
}

}  // namespace dolsot::sandbox
