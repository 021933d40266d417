// CellFacts: bindings, classes and alias chains of one cell, resolved once the
// walk is over (see cell_facts.h).
#include "sandbox/cell_facts.h"

#include <map>
#include <set>
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

bool CellFacts::HasBaseRootedIn(std::int32_t index, const NameSet& names) const {
  if (index < 0 || static_cast<std::size_t>(index) >= classes_.size() || names.empty()) return false;
  for (const Base& base : classes_[static_cast<std::size_t>(index)].bases) {
    if (names.contains(base.root)) return true;
  }
  return false;
}

bool CellFacts::DerivesOnlyFrom(std::int32_t index, const NameSet& sealed) {
  if (index < 0 || static_cast<std::size_t>(index) >= classes_.size()) return false;
  if (!classes_[static_cast<std::size_t>(index)].plain) return false;
  const std::uint32_t start = classes_[static_cast<std::size_t>(index)].start;
  // Copied: BaseIsOwn may decide other classes (classes_ does not grow).
  const std::vector<Base> bases = classes_[static_cast<std::size_t>(index)].bases;
  for (const Base& base : bases) {
    if (base.bare && sealed.contains(base.root)) continue;
    if (!BaseIsOwn(base, start)) return false;
  }
  return true;
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

std::vector<std::int32_t> CellFacts::Descendants(const std::vector<std::int32_t>& roots) const {
  // By name, whatever else the name is bound to: a base rooted at a name some
  // class statement binds may be that class. Linear in classes and bases.
  std::multimap<std::string_view, std::int32_t> by_base;  // base root -> class
  for (std::size_t i = 0; i < classes_.size(); ++i) {
    for (const Base& base : classes_[i].bases) by_base.emplace(base.root, static_cast<std::int32_t>(i));
  }
  std::vector<bool> seen(classes_.size(), false);
  std::set<std::string_view> names_done;
  std::vector<std::int32_t> found, todo;
  for (std::int32_t root : roots) {
    if (root >= 0 && static_cast<std::size_t>(root) < classes_.size()) todo.push_back(root);
  }
  while (!todo.empty()) {
    std::int32_t current = todo.back();
    todo.pop_back();
    if (seen[current]) continue;
    seen[current] = true;
    found.push_back(current);
    std::string_view name = classes_[current].name;
    if (!names_done.insert(name).second) continue;
    auto [first, last] = by_base.equal_range(name);
    for (auto it = first; it != last; ++it) todo.push_back(it->second);
  }
  return found;
}

bool CellFacts::FamilyIsOwn(std::int32_t index) {
  if (index < 0 || static_cast<std::size_t>(index) >= classes_.size()) return false;
  if (family_not_own_.empty()) {
    // From every class that is not own, up through the classes its bases
    // may name: each class and each name is expanded once.
    family_not_own_.assign(classes_.size(), false);
    std::multimap<std::string_view, std::int32_t> by_name;
    for (std::size_t i = 0; i < classes_.size(); ++i) by_name.emplace(classes_[i].name, static_cast<std::int32_t>(i));
    std::vector<std::int32_t> todo;
    for (std::size_t i = 0; i < classes_.size(); ++i) {
      if (!ClassIsOwn(static_cast<std::int32_t>(i))) todo.push_back(static_cast<std::int32_t>(i));
    }
    std::set<std::string_view> names_done;
    while (!todo.empty()) {
      std::int32_t current = todo.back();
      todo.pop_back();
      if (family_not_own_[current]) continue;
      family_not_own_[current] = true;
      for (const Base& base : classes_[current].bases) {
        if (!names_done.insert(base.root).second) continue;
        auto [first, last] = by_name.equal_range(base.root);
        for (auto it = first; it != last; ++it) todo.push_back(it->second);
      }
    }
  }
  return !family_not_own_[index];
}

bool CellFacts::IsOwnClassName(std::string_view name) {
  auto it = bindings_.find(name);
  return it != bindings_.end() && it->second.count == 1 && it->second.source == Source::kClass &&
         ClassIsOwn(it->second.class_index);
}

bool CellFacts::IsSafeImport(std::string_view name, std::uint32_t before) const {
  auto it = bindings_.find(name);
  return it != bindings_.end() && it->second.count == 1 && it->second.start < before &&
         it->second.source == Source::kSafeImport;
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
