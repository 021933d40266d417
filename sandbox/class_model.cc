// The classes and methods a cell defines (see class_model.h).
#include "sandbox/class_model.h"

#include <utility>

#include "sandbox/tree_sitter_handles.h"

namespace dolsot::sandbox {

std::int32_t ClassModel::AddMethod(Method method) {
  methods_.push_back(std::move(method));
  return static_cast<std::int32_t>(methods_.size() - 1);
}

void ClassModel::AddClass(std::int32_t index, TSNode node, std::vector<TSNode> decorators) {
  class_nodes_.push_back(node);
  if (!decorators.empty()) class_decorators_[index] = std::move(decorators);
}

const std::vector<TSNode>& ClassModel::ClassDecorators(std::int32_t index) const {
  static const std::vector<TSNode> kNone;
  auto it = class_decorators_.find(index);
  return it == class_decorators_.end() ? kNone : it->second;
}

// Counts every identifier under `node` (NFKC-folded) into `counts`.
void ClassModel::CountNames(TSNode node, NameCounts& counts) {
  if (ts_node_is_null(node)) return;
  TreeCursor cursor(node);
  uint32_t depth = 0;
  while (true) {
    TSNode current = ts_tree_cursor_current_node(cursor.get());
    if (grammar_.KindOf(current) == NodeKind::kIdentifier) ++counts[std::string(Name(current))];
    if (ts_tree_cursor_goto_first_child(cursor.get())) {
      ++depth;
      continue;
    }
    while (!ts_tree_cursor_goto_next_sibling(cursor.get())) {
      if (depth == 0 || !ts_tree_cursor_goto_parent(cursor.get())) return;
      --depth;
    }
    if (depth == 0) return;
  }
}

// What a class body does with names outside function bodies, counted once
// per class: every identifier of its statements, and of its defs' decorators,
// parameters and return annotations, but the decorators `@property`,
// `@classmethod` and `@x.setter` / `@x.deleter` (their names are checked
// through `defs` and `property_defs`). Conservative: `leak = m`, `x = o.m`,
// `def k(self, f=m)` all count as mentions of `m`.
const ClassModel::ClassBody& ClassModel::BodyOf(TSNode class_node) {
  auto [it, inserted] = class_bodies_.try_emplace(ts_node_start_byte(class_node));
  ClassBody& summary = it->second;
  if (!inserted) return summary;
  TSNode body = ts_node_child_by_field_id(class_node, grammar_.body);
  uint32_t count = ts_node_is_null(body) ? 0 : ts_node_named_child_count(body);
  for (uint32_t i = 0; i < count; ++i) {
    TSNode statement = ts_node_named_child(body, i);
    TSNode definition = statement;
    std::vector<TSNode> decorators;
    if (grammar_.KindOf(statement) == NodeKind::kDecoratedDefinition) {
      for (uint32_t j = 0; j < ts_node_named_child_count(statement); ++j) {
        TSNode child = ts_node_named_child(statement, j);
        if (grammar_.KindOf(child) == NodeKind::kDecorator) decorators.push_back(child);
      }
      definition = ts_node_child_by_field_id(statement, grammar_.definition);
    }
    if (grammar_.KindOf(definition) != NodeKind::kFunctionDefinition) {
      CountNames(statement, summary.mentions);
      continue;
    }
    TSNode def_name = ts_node_child_by_field_id(definition, grammar_.name);
    std::string name = ts_node_is_null(def_name) ? "" : std::string(Name(def_name));
    bool property_like = decorators.size() == 1;
    for (TSNode decorator : decorators) {
      TSNode expression = ts_node_named_child(decorator, 0);
      NodeKind kind = grammar_.KindOf(expression);
      if (kind == NodeKind::kIdentifier &&
          (Name(expression) == "property" || Name(expression) == "classmethod")) {
        property_like = property_like && Name(expression) == "property";
        continue;
      }
      TSNode object = kind == NodeKind::kAttribute ? ts_node_child_by_field_id(expression, grammar_.object)
                                                   : TSNode{};
      TSNode verb = kind == NodeKind::kAttribute ? ts_node_child_by_field_id(expression, grammar_.attribute)
                                                 : TSNode{};
      if (!ts_node_is_null(verb) && grammar_.KindOf(object) == NodeKind::kIdentifier &&
          (Name(verb) == "setter" || Name(verb) == "deleter")) {
        property_like = property_like && Name(object) == name;
        continue;
      }
      property_like = false;
      CountNames(decorator, summary.mentions);
    }
    ++summary.defs[name];
    if (property_like) ++summary.property_defs[name];
    CountNames(ts_node_child_by_field_id(definition, grammar_.parameters), summary.mentions);
    CountNames(ts_node_child_by_field_id(definition, grammar_.return_type), summary.mentions);
  }
  return summary;
}

// Whether the class body could hand out the method's function (`leak = m`, a
// second def of the name) or make `name` something else than the one
// definition (`property = staticmethod`).
bool ClassModel::ClassBodyMentions(const Method& method, std::string_view name) {
  const ClassBody& body = BodyOf(method.class_node);
  auto count = [](const NameCounts& counts, std::string_view key) {
    auto it = counts.find(key);
    return it == counts.end() ? 0 : it->second;
  };
  if (count(body.mentions, name) != 0) return true;
  // The property a setter extends: every def of that name is `@property` or
  // `@p.setter` / `@p.deleter`. `property` / `classmethod`: no def of it.
  if (!method.property.empty() && name == method.property) {
    return count(body.defs, name) != count(body.property_defs, name);
  }
  if (name == method.name) return count(body.defs, name) != 1;
  return count(body.defs, name) != 0;
}

bool ClassModel::InstanceOnly(std::int32_t slot, const NameSet& declared) {
  Method& method = methods_[static_cast<std::size_t>(slot)];
  if (method.instance_only >= 0) return method.instance_only == 1;
  // `nonlocal self` in a nested function rebinds it unseen by the method's walk.
  bool only = !method.binds_super && !declared.contains(method.self);
  switch (method.kind) {
    case MethodKind::kOther:
      only = false;
      break;
    case MethodKind::kRegular:
      // Only its first parameter when the class is sealed (CheckOwnMethods).
      only = only && !method.rebinds_self && !ClassBodyMentions(method, method.name);
      break;
    case MethodKind::kClassMethod:
      only = only && !method.rebinds_self && !ClassBodyMentions(method, method.name) &&
             !ClassBodyMentions(method, "classmethod");
      break;
    case MethodKind::kDunder:
      only = only && !ClassBodyMentions(method, method.name);
      break;
    case MethodKind::kGetter:
      only = only && !ClassBodyMentions(method, "property");
      break;
    case MethodKind::kSetter:
      // Every mention of the property's name must be a def decorated with
      // @property or @p.setter/@p.deleter, so `p` is a property here.
      only = only && !ClassBodyMentions(method, "property") &&
             !ClassBodyMentions(method, method.property);
      break;
  }
  method.instance_only = only ? 1 : 0;
  return only;
}

}  // namespace dolsot::sandbox
