// The classes and methods a cell defines, as the gate's `self._x` rules see
// them: how Python calls each method and whether it surely gets an instance of
// its class as `self` (docs/gate.md, "The cell's own classes").
#pragma once

#include <tree_sitter/api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/node_text.h"
#include "sandbox/policy.h"
#include "sandbox/python_grammar.h"

namespace dolsot::sandbox {

// How Python calls a method a cell defines: only instance-only methods are
// sure to get an instance of their class as `self` (docs/gate.md).
enum class MethodKind : std::uint8_t {
  kRegular,      // no decorator: `A.m(anything)` calls it with any first argument, so
                 // `self._x` in it needs the class sealed (docs/gate.md)
  kDunder,       // an allowed __dunder__ method, no decorator: Python calls it on instances
  kGetter,       // `@property`: `A.p` is the property, its function is never handed out
  kSetter,       // `@p.setter` / `@p.deleter` of such a property
  kClassMethod,  // `@classmethod`: `cls` is the class or a subclass, never anything else
  kOther,        // `@staticmethod` or any other decorator: its first parameter is anything
};

struct Method {
  TSNode node;          // the function_definition
  TSNode class_node;    // its class_definition
  std::int32_t class_index = -1;
  std::string name;
  std::string self;      // its first parameter
  std::string property;  // kSetter: the property it extends
  MethodKind kind = MethodKind::kRegular;
  bool binds_super = false;  // `super` bound in it: super() may be anything
  bool rebinds_self = false; // its first parameter bound again in it
  std::int8_t instance_only = -1;  // decided at the end
};

// The methods (by slot) and class statements (by CellFacts class index) the
// walk met, and what each class body does with names. Reads the tree of the
// source it was made with; keep both alive.
class ClassModel {
 public:
  ClassModel(std::string_view code, const PythonGrammar& grammar) : text_(code), grammar_(grammar) {}

  // Adds a method; returns its slot.
  std::int32_t AddMethod(Method method);
  Method& method(std::int32_t slot) { return methods_[static_cast<std::size_t>(slot)]; }
  const std::vector<Method>& methods() const { return methods_; }

  // Adds the class statement of CellFacts class index `index` (the next one)
  // with its decorators.
  void AddClass(std::int32_t index, TSNode node, std::vector<TSNode> decorators);
  TSNode ClassNode(std::int32_t index) const { return class_nodes_[static_cast<std::size_t>(index)]; }
  const std::vector<TSNode>& ClassDecorators(std::int32_t index) const;

  // Whether Python can only call the method in `slot` with an instance of its
  // class as `self`: see MethodKind; `super` not rebound in it, nor its self
  // declared (`declared`: the names of the cell's global / nonlocal statements).
  bool InstanceOnly(std::int32_t slot, const NameSet& declared);

 private:
  using NameCounts = std::map<std::string, int, std::less<>>;
  struct ClassBody {
    NameCounts mentions, defs, property_defs;
  };
  const ClassBody& BodyOf(TSNode class_node);
  void CountNames(TSNode node, NameCounts& counts);
  bool ClassBodyMentions(const Method& method, std::string_view name);
  std::string_view Name(TSNode node) { return text_.Name(node); }

  NodeText text_;
  const PythonGrammar& grammar_;
  std::vector<Method> methods_;
  std::vector<TSNode> class_nodes_;  // by CellFacts class index
  std::map<std::int32_t, std::vector<TSNode>> class_decorators_;  // class index -> decorators
  std::map<std::uint32_t, ClassBody> class_bodies_;  // by the class statement's start
};

}  // namespace dolsot::sandbox
