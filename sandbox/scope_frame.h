// The gate walk's frames: what each node of the tree is to Python (a read, a
// binding, a parameter, ...) and in which scope, derived from its parent's frame.
#pragma once

#include <tree_sitter/api.h>

#include <cstdint>

#include "sandbox/python_grammar.h"

namespace dolsot::sandbox {

enum class Role : std::uint8_t {
  kLoad,         // an expression: names are read
  kBind,         // an assignment target: names are bound in the current scope
  kCompBind,     // a comprehension's for-target: local to the comprehension
  kParam,        // a parameter: local to the function
  kDelete,       // a del target
  kGlobalDecl,   // global / nonlocal
  kAttrName,     // the name after a dot: an attribute
  kKeywordName,  // f(name=...): a keyword, not a lookup
  kPattern,      // inside a match case pattern
  kDottedLoad,   // a dotted name read as a value (class patterns, value patterns)
};

enum class Scope : std::uint8_t { kModule, kFunction, kClass };

struct Frame {
  NodeKind kind = NodeKind::kOther;
  Role role = Role::kLoad;
  Scope scope = Scope::kModule;
  bool after_as = false;           // an `as` token was seen among the children
  std::uint32_t identifiers = 0;   // identifier children seen so far
  std::uint32_t identifier_count = 0;  // dotted_name: how many components it has
  bool in_annotation = false;      // under a `type` node (an annotation)
  bool in_bases = false;           // a class definition's superclasses
  bool skip_attribute = false;     // the attribute name is checked elsewhere (`self._x`, super())
  bool top_level = false;          // a statement directly in the module (or its definition)
  bool class_name = false;         // the name a class statement binds
  bool except_type = false;        // an except clause's exception types
  bool except_alias = false;       // an except clause's `as` name
  bool pattern_keyword = false;    // the attribute name of a keyword pattern (`case C(x=...)`)
  bool type_is_local = false;      // inside a function with a parameter named `type`
  bool type_parameter = false;     // a function definition: one of its parameters is `type`
  bool cleanup_pending = false;    // inside a try or with statement of the current function:
                                   // a yield or await here leaves cleanup code for later
  std::int32_t class_slot = -1;    // the innermost class statement (CellFacts index), or -1
  std::int32_t self_slot = -1;     // the enclosing method (its ClassModel slot), or -1
  std::int32_t method_self = -1;   // a function definition: its own ClassModel slot, or -1
};

// Parents whose children's roles depend on the child's field (see DeriveFrame):
// only for them is a field worth looking up.
bool RoleDependsOnField(NodeKind kind);

// The role and scope of a named child of kind `kind`, from its parent's frame
// and its field.
Frame DeriveFrame(const Frame& parent, NodeKind kind, TSFieldId field, const PythonGrammar& grammar);

}  // namespace dolsot::sandbox
