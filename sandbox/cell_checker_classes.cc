// The gate's rules for the classes a cell defines (see cell_checker.h and
// class_model.h): `self._x` in methods, `super()` dunders, and the uses of a
// sealed class that could hand one of its methods out (docs/gate.md).
#include "sandbox/cell_checker.h"

#include <algorithm>

#include "sandbox/rules.h"

namespace dolsot::sandbox {

// A method (a def directly in a class body): its first parameter is its self,
// its decorators decide how Python calls it (MethodKind). `__exit__`'s
// exception and traceback parameters hold a caught exception.
void CellChecker::EnterFunction(TSNode node, Frame& frame) {
  frame.method_self = -1;
  TSNode parameters = ts_node_child_by_field_id(node, grammar_.parameters);
  uint32_t count = ts_node_is_null(parameters) ? 0 : ts_node_named_child_count(parameters);
  TSNode name_node = ts_node_child_by_field_id(node, grammar_.name);
  std::string name = ts_node_is_null(name_node) ? "" : std::string(Name(name_node));
  bool binds_super = false;
  for (uint32_t i = 0; i < count; ++i) {
    TSNode parameter = ts_node_named_child(parameters, i);
    if (grammar_.KindOf(parameter) != NodeKind::kIdentifier) {
      parameter = ts_node_named_child(parameter, 0);  // typed or default: its name first
    }
    if (ts_node_is_null(parameter) || grammar_.KindOf(parameter) != NodeKind::kIdentifier) continue;
    std::string parameter_name(Name(parameter));
    if (parameter_name == "super") binds_super = true;
    if (parameter_name == "type") frame.type_parameter = true;
    if (i > 0 && (name == "__exit__" || name == "__aexit__")) caught_.insert(parameter_name);
  }
  if (frame.scope != Scope::kClass || frame.class_slot < 0 || count == 0) return;
  TSNode first = ts_node_named_child(parameters, 0);
  if (grammar_.KindOf(first) != NodeKind::kIdentifier) return;  // *args, defaults, ...
  Method method{node, ts_node_parent(ts_node_parent(node)), frame.class_slot,
                name, std::string(Name(first))};
  method.binds_super = binds_super;
  TSNode decorated = ts_node_parent(node);
  std::vector<TSNode> decorators;
  if (grammar_.KindOf(decorated) == NodeKind::kDecoratedDefinition) {
    method.class_node = ts_node_parent(ts_node_parent(decorated));
    for (uint32_t i = 0; i < ts_node_named_child_count(decorated); ++i) {
      TSNode child = ts_node_named_child(decorated, i);
      if (grammar_.KindOf(child) == NodeKind::kDecorator) decorators.push_back(child);
    }
  }
  if (decorators.empty()) {
    if (IsDunder(name) && policy_.allowed_dunders.contains(name) && !IsDataDunder(name)) {
      method.kind = MethodKind::kDunder;
    }
  } else if (decorators.size() == 1) {
    method.kind = MethodKind::kOther;
    TSNode expression = ts_node_named_child(decorators[0], 0);
    NodeKind kind = grammar_.KindOf(expression);
    if (kind == NodeKind::kIdentifier && Name(expression) == "property") {
      method.kind = MethodKind::kGetter;
    } else if (kind == NodeKind::kIdentifier && Name(expression) == "classmethod") {
      method.kind = MethodKind::kClassMethod;
    } else if (kind == NodeKind::kAttribute) {
      TSNode object = ts_node_child_by_field_id(expression, grammar_.object);
      TSNode attribute = ts_node_child_by_field_id(expression, grammar_.attribute);
      std::string verb = ts_node_is_null(attribute) ? "" : std::string(Name(attribute));
      if (grammar_.KindOf(object) == NodeKind::kIdentifier && (verb == "setter" || verb == "deleter")) {
        method.property = Name(object);
        if (method.property == name) method.kind = MethodKind::kSetter;
      }
    }
  } else {
    method.kind = MethodKind::kOther;
  }
  frame.method_self = classes_.AddMethod(std::move(method));
}

// A class statement: what CellFacts needs to decide whether it is the cell's
// own, and bases rooted at a toolbox refused (an instance of a toolbox's
// class made without its __init__, private hooks overridden).
void CellChecker::EnterClass(TSNode node, Frame& frame) {
  TSNode name_node = ts_node_child_by_field_id(node, grammar_.name);
  std::string name = ts_node_is_null(name_node) ? "" : std::string(Name(name_node));
  TSNode superclasses = ts_node_child_by_field_id(node, grammar_.superclasses);
  uint32_t count = ts_node_is_null(superclasses) ? 0 : ts_node_named_child_count(superclasses);
  bool plain = true;
  std::vector<CellFacts::Base> bases;
  for (uint32_t i = 0; i < count; ++i) {
    TSNode base = ts_node_named_child(superclasses, i);
    if (grammar_.KindOf(base) == NodeKind::kComment) continue;
    std::string root = ChainRoot(base);
    if (!root.empty()) bases_.push_back(PendingRoot{root, base, name});
    TSNode chain = base;
    while (grammar_.KindOf(chain) == NodeKind::kSubscript) {
      chain = ts_node_child_by_field_id(chain, grammar_.value);
    }
    bool bare = grammar_.KindOf(chain) == NodeKind::kIdentifier;
    TSNode walk = chain;
    while (grammar_.KindOf(walk) == NodeKind::kAttribute) {
      walk = ts_node_child_by_field_id(walk, grammar_.object);
    }
    if (grammar_.KindOf(walk) != NodeKind::kIdentifier) plain = false;  // calls, splats, keywords
    bases.push_back(CellFacts::Base{root, bare});
  }
  uint32_t start = ts_node_start_byte(node);
  frame.class_slot = facts_.AddClass(name, start, frame.top_level, plain, std::move(bases));
  std::vector<TSNode> decorators;
  TSNode decorated = ts_node_parent(node);
  if (grammar_.KindOf(decorated) == NodeKind::kDecoratedDefinition) {
    for (uint32_t i = 0; i < ts_node_named_child_count(decorated); ++i) {
      TSNode child = ts_node_named_child(decorated, i);
      if (grammar_.KindOf(child) == NodeKind::kDecorator) decorators.push_back(child);
    }
  }
  classes_.AddClass(frame.class_slot, node, std::move(decorators));
  if (frame.scope == Scope::kModule && !name.empty()) {
    facts_.NoteBinding(name, start, frame.top_level ? CellFacts::Source::kClass
                                                    : CellFacts::Source::kOther,
                       frame.class_slot);
  }
}

// `self._x` where self is a method's first parameter: decided at the end for
// instance-only methods, refused with the reason in any other method.
bool CellChecker::CheckSelfAttribute(TSNode attribute, const Frame& frame) {
  if (frame.self_slot < 0) return false;
  const Method& method = classes_.method(frame.self_slot);
  TSNode object = ts_node_child_by_field_id(attribute, grammar_.object);
  TSNode name = ts_node_child_by_field_id(attribute, grammar_.attribute);
  if (grammar_.KindOf(object) != NodeKind::kIdentifier || ts_node_is_null(name)) return false;
  if (Name(object) != method.self) return false;
  std::string attr(Name(name));
  if (!attr.starts_with("_") || attr.starts_with("__")) return false;
  if (IsPublicUnderscoreAttribute(attr)) return false;  // `self._replace(...)`: public API
  std::string_view bare = std::string_view(attr).substr(1);
  if (bare.empty() || AttributeVerdict(bare) || IsBuiltinName(bare) || IsInternalAttribute(attr)) {
    return false;  // `self._os`: the default check refuses it
  }
  if (method.kind == MethodKind::kRegular && !plain_methods_allowed_) {
    std::string call = "`" + method.name + "` as `Class." + method.name + "(obj)`";
    std::string why =
        !policy_.private_in_plain_methods
            ? "Policy.private_in_plain_methods is off, so a later cell could call " + call
        : memory_ == nullptr
            ? "the cell is checked on its own, without a session's gate memory (check_ast; a "
              "session's AST gate has one), so a later cell could call " + call
            : "this session was restored from a checkpoint that does not say which classes its "
              "earlier cells sealed, so a later cell could call " + call;
    Report(Rule::kPrivateAttribute, attribute,
           "attribute `" + attr + "` is private: " + why + " with any object as `" + method.self +
           "`; `" + method.self + "._x` is allowed in __dunder__ methods, properties and class "
           "methods (docs/gate.md)");
    return true;
  }
  if (method.kind == MethodKind::kOther) {
    Report(Rule::kPrivateAttribute, attribute,
           "attribute `" + attr + "` is private: `" + method.name + "` is a static method or "
           "has a decorator the gate cannot follow, so its `" + method.self + "` may be any "
           "object; `" + method.self + "._x` is allowed in plain methods, properties and "
           "class methods (docs/gate.md)");
    return true;
  }
  accesses_.push_back(PendingAccess{attribute, frame.self_slot, true});
  return true;
}

// `type(x).m`, `super(C, x).m`, and `super().m` where the innermost function
// is no plain method (a class method's `super()` reads off the class): m may
// come back as a plain function. Decided at the end against the sealed methods.
void CellChecker::NoteClassRead(TSNode attribute, const Frame& frame) {
  TSNode object = ts_node_child_by_field_id(attribute, grammar_.object);
  while (grammar_.KindOf(object) == NodeKind::kParenthesizedExpression) {
    object = ts_node_named_child(object, 0);
  }
  if (grammar_.KindOf(object) != NodeKind::kCall) return;
  TSNode function = ts_node_child_by_field_id(object, grammar_.function);
  if (grammar_.KindOf(function) != NodeKind::kIdentifier) return;
  std::string_view callee = Name(function);
  if (callee != "type" && callee != "super") return;
  TSNode arguments = ts_node_child_by_field_id(object, grammar_.arguments);
  bool zero = ts_node_is_null(arguments) || ts_node_named_child_count(arguments) == 0;
  // A zero-argument super() in a method: decided at the end from its kind
  // and whether it rebinds `super`.
  std::int32_t slot = callee == "super" && zero ? frame.self_slot : -1;
  class_reads_.emplace_back(attribute, slot);
}

// `super().__init__(...)` in an instance-only method: the one way to read a
// method dunder as an attribute (decided at the end).
bool CellChecker::CheckSuperDunder(TSNode attribute, const Frame& frame) {
  TSNode name = ts_node_child_by_field_id(attribute, grammar_.attribute);
  if (ts_node_is_null(name)) return false;
  std::string attr(Name(name));
  if (!IsDunder(attr) || IsDataDunder(attr) || !policy_.allowed_dunders.contains(attr)) return false;
  TSNode object = ts_node_child_by_field_id(attribute, grammar_.object);
  if (grammar_.KindOf(object) != NodeKind::kCall || frame.self_slot < 0) return false;
  TSNode function = ts_node_child_by_field_id(object, grammar_.function);
  TSNode arguments = ts_node_child_by_field_id(object, grammar_.arguments);
  if (grammar_.KindOf(function) != NodeKind::kIdentifier || Name(function) != "super") return false;
  if (!ts_node_is_null(arguments) && ts_node_named_child_count(arguments) != 0) return false;
  accesses_.push_back(PendingAccess{attribute, frame.self_slot, false});
  return true;
}

// A class decorator that is known not to read methods off the class it gets:
// `dataclasses.dataclass`, `functools.total_ordering`, `typing.final`,
// `enum.unique` (optionally called), through names the cell imported once
// before the class (`from dataclasses import dataclass`, `import dataclasses`).
bool CellChecker::SafeClassDecorator(TSNode decorator, std::uint32_t class_start) {
  TSNode expression = ts_node_named_child(decorator, 0);
  if (grammar_.KindOf(expression) == NodeKind::kCall) {
    expression = ts_node_child_by_field_id(expression, grammar_.function);
  }
  // The dotted path the decorator names, through what the cell imported.
  std::string suffix;
  while (grammar_.KindOf(expression) == NodeKind::kAttribute) {
    TSNode attribute = ts_node_child_by_field_id(expression, grammar_.attribute);
    if (ts_node_is_null(attribute)) return false;
    suffix = "." + std::string(Name(attribute)) + suffix;
    expression = ts_node_child_by_field_id(expression, grammar_.object);
  }
  if (grammar_.KindOf(expression) != NodeKind::kIdentifier) return false;
  std::string root(Name(expression));
  auto imported = imported_modules_.find(root);
  if (imported == imported_modules_.end() || !facts_.IsSafeImport(root, class_start)) return false;
  std::string path = imported->second + suffix;
  return path == "dataclasses.dataclass" || path == "functools.total_ordering" ||
         path == "typing.final" || path == "enum.unique";
}

// A use of a sealed class's name (or a class method's `cls`) that cannot
// hand a plain method out: see CheckOwnMethods.
bool CellChecker::SealedUse(const LoadSite& load, std::string_view name,
                            const NameSet& plain_methods) {
  if (load.except_type) return true;
  if (load.base) {  // a bare base: that class is sealed too
    return grammar_.KindOf(ts_node_parent(ts_node_parent(load.node))) == NodeKind::kClassDefinition;
  }
  if (load.annotation) {  // a class body's annotation is kept (dataclasses.fields(C)[0].type)
    TSNode up = load.node;
    while (!ts_node_is_null(up) && grammar_.KindOf(up) != NodeKind::kType) up = ts_node_parent(up);
    TSNode owner = ts_node_parent(up);
    if (grammar_.KindOf(owner) != NodeKind::kAssignment) return true;
    TSNode block = ts_node_parent(owner);
    if (std::string_view(ts_node_type(block)) == "expression_statement") block = ts_node_parent(block);
    return grammar_.KindOf(ts_node_parent(block)) != NodeKind::kClassDefinition;
  }
  Use use = ClassifyUse(load.node, grammar_, false);
  switch (use.position) {
    case UsePosition::kCallee:
    case UsePosition::kIdentity:
    case UsePosition::kClassPattern:
    case UsePosition::kInterpolation:
      return true;
    case UsePosition::kAttributeObject:
      return !ts_node_is_null(use.other) && !plain_methods.contains(Name(use.other));
    case UsePosition::kEquality: {  // `type(x) == C`: no code of the cell's runs
      TSNode function = grammar_.KindOf(use.other) == NodeKind::kCall
                            ? ts_node_child_by_field_id(use.other, grammar_.function)
                            : TSNode{};
      return IsBuiltinCallee(function, {"type"});
    }
    case UsePosition::kArgument:
      if (ShownOnly(use, load.node, Rule::kPrivateAttribute,
                    "`" + std::string(name) + "` shown by a local function")) {
        return true;
      }
      if (use.count == 2 && use.index == 1 && IsBuiltinCallee(use.other, {"isinstance", "issubclass"})) {
        builtin_uses_.push_back(BuiltinUse{std::string(Name(use.other)), load.node,
                                           Rule::kPrivateAttribute,
                                           "`" + std::string(name) + "` passed to a local `" +
                                               std::string(Name(use.other)) + "`"});
        return true;
      }
      return false;
    default:
      return false;
  }
}

// `type(x).m`, `super(...).m`, `super()` where the innermost function gets
// no instance: refused for the plain methods that read `self._x`.
void CellChecker::CheckClassReads(const NameSet& plain_methods) {
  for (const auto& [attribute, slot] : class_reads_) {
    TSNode name = ts_node_child_by_field_id(attribute, grammar_.attribute);
    if (ts_node_is_null(name) || !plain_methods.contains(Name(name))) continue;
    if (slot >= 0) {
      const Method& method = classes_.method(slot);
      if (!method.binds_super && method.kind != MethodKind::kClassMethod &&
          method.kind != MethodKind::kOther) {
        continue;  // super() in a method that gets an instance: a bound method
      }
    }
    std::string attr(Name(name));
    Report(Rule::kPrivateAttribute, attribute,
           "`." + attr + "` read off a class (`type(x)`, `super(...)`, `super()` in a class "
           "method): a method that reads `self._x` comes back as a plain function that takes "
           "any object as `self`; call it on an instance");
  }
}

// `self._x` and `super().__x__` in methods, decided once the cell is seen: in
// an instance-only method of a class the cell owns. A class is the cell's own
// when it and every class of the cell deriving from it are (FamilyIsOwn): an
// instance of a subclass with a host base (`class D(A, Base)`, Base from an
// earlier cell) would carry the host's private state into A's methods, and a
// class method of A would get D as `cls`.
void CellChecker::CheckMethodAccesses() {
  for (const PendingAccess& access : accesses_) {
    const Method& method = classes_.method(access.method);
    TSNode name = ts_node_child_by_field_id(access.node, grammar_.attribute);
    std::string attr(Name(name));
    bool plain = method.kind == MethodKind::kRegular || method.kind == MethodKind::kClassMethod;
    if (!access.private_attribute && plain) {
      Report(Rule::kDunderAttribute, access.node,
             "`super()." + attr + "` in `" + method.name + "`: method dunders are read through "
             "super() only inside __dunder__ methods and properties, which Python calls on "
             "instances itself");
    } else if (!classes_.InstanceOnly(access.method, declared_)) {
      std::string used = method.kind == MethodKind::kGetter || method.kind == MethodKind::kSetter
                             ? std::string("property")
                             : method.name;
      Report(access.private_attribute ? Rule::kPrivateAttribute : Rule::kDunderAttribute,
             access.node,
             "`" + attr + "` in `" + method.name + "`: its class body also uses `" + used +
                 "`, or the method rebinds `" + method.self + "` or `super` (also through "
                 "`nonlocal`), so the method may get any object as `" + method.self + "`");
    } else if (access.private_attribute && !facts_.FamilyIsOwn(method.class_index)) {
      Report(Rule::kPrivateAttribute, access.node,
             "attribute `" + attr + "` is private, and the gate cannot see that the class owns "
             "it: `self._x` is allowed in a top-level class whose bases are builtins, classes "
             "imported in this cell or classes defined above it in this cell, and so are the "
             "bases of every class of the cell that derives from it (docs/gate.md)");
    }
  }
}

// `self._x` in a plain method and `cls._x` in a class method trust their first
// parameter. Python passes a plain method anything as `self` only when the
// method is read off the class, so every class deriving from one that has such
// a method is sealed: its name (and a class method's `cls`) may only be
// called, tested (isinstance/issubclass, `is`, `except`, a class pattern),
// used as a bare base, annotated outside class bodies, or have attributes read
// that are not those methods; `type(x).m` and `super().m` off a class are
// refused for them, and its decorators must be known ones (docs/gate.md).
void CellChecker::CheckOwnMethods() {
  NameSet plain_methods;  // names of plain methods that read self._x
  std::vector<std::int32_t> owners;
  for (const PendingAccess& access : accesses_) {
    if (!access.private_attribute) continue;
    const Method& method = classes_.method(access.method);
    if (method.kind == MethodKind::kRegular) {
      plain_methods.insert(method.name);
      owners.push_back(method.class_index);
      if (method.name.size() > 2 && method.name.starts_with("_") && method.name.ends_with("_")) {
        Report(Rule::kPrivateAttribute, access.node,
               "`" + method.self + "._x` in `" + method.name + "`: enum and other standard "
               "bases call `_sunder_` hooks off the class (`_missing_(value)`), with any object "
               "as `" + method.self + "`; make it a @classmethod or rename it");
      }
    }
  }
  // The session's earlier cells: their sealed methods are never read off a
  // class here either, and a class of this cell deriving from one of their
  // sealed classes is sealed too.
  std::vector<std::int32_t> inherited;  // classes with a bare base an earlier cell sealed
  if (memory_ != nullptr) {
    plain_methods.insert(memory_->sealed_methods.begin(), memory_->sealed_methods.end());
    for (std::int32_t index = 0; index < facts_.ClassCount(); ++index) {
      if (facts_.HasBaseRootedIn(index, memory_->sealed_classes)) inherited.push_back(index);
    }
  }
  // `cls._x` alone needs nothing more: a class method is bound to the class.
  if (plain_methods.empty() && (memory_ == nullptr || memory_->sealed_classes.empty())) return;
  std::sort(owners.begin(), owners.end());
  owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
  NameSet sealed;  // names of sealed classes
  if (memory_ != nullptr) sealed.insert(memory_->sealed_classes.begin(), memory_->sealed_classes.end());
  std::vector<std::int32_t> roots = owners;
  roots.insert(roots.end(), inherited.begin(), inherited.end());
  std::vector<std::int32_t> family = facts_.Descendants(roots);
  for (std::int32_t index : family) sealed.insert(facts_.ClassName(index));
  for (std::int32_t index : family) {
    const std::string& name = facts_.ClassName(index);
    for (TSNode decorator : classes_.ClassDecorators(index)) {
      if (!SafeClassDecorator(decorator, facts_.ClassStart(index))) {
        Report(Rule::kPrivateAttribute, decorator,
               "a decorator of class `" + name + "`, whose methods read `self._x`: it gets the "
               "class and could call a method with any object as `self`; only `dataclasses.dataclass`, "
               "`functools.total_ordering`, `typing.final` and `enum.unique`, imported in this "
               "cell, are allowed");
      }
    }
  }
  // A class deriving from an earlier cell's sealed class: the sealed class's
  // methods read `self._x` of its instances, so nothing the gate cannot vouch
  // for may sit in them (`class D(A, Base)`, Base a host's class whose
  // __init__ sets private state), and no metaclass may get the class.
  if (!inherited.empty()) {
    for (std::int32_t index : facts_.Descendants(inherited)) {
      if (facts_.DerivesOnlyFrom(index, sealed)) continue;
      Report(Rule::kPrivateAttribute, classes_.ClassNode(index),
             "class `" + facts_.ClassName(index) + "` derives from a class an earlier cell sealed "
             "(its methods read `self._x`), so its other bases must be builtin classes, names "
             "imported in this cell from an allowed module, this cell's own classes or other "
             "sealed classes, with no keyword (metaclass=) (docs/gate.md, \"The gate's memory\")");
    }
  }
  if (learned_ != nullptr) {
    for (std::int32_t index : family) learned_->sealed_classes.insert(facts_.ClassName(index));
    for (const PendingAccess& access : accesses_) {
      const Method& method = classes_.method(access.method);
      if (access.private_attribute && method.kind == MethodKind::kRegular) {
        learned_->sealed_methods.insert(method.name);
      }
    }
  }
  auto refuse = [&](TSNode node, const std::string& name, std::string_view what) {
    Report(Rule::kPrivateAttribute, node,
           std::string(what) + " `" + name + "` used as a value: its class has methods that read "
           "`self._x`, and a method read off the class takes any object as `self`; use it to "
           "make instances, in isinstance/issubclass/`is`/`except`, as a base, or read "
           "attributes other than those methods (docs/gate.md)");
  };
  for (const LoadSite& load : loads_) {
    std::string name(Name(load.node));
    if (sealed.contains(name) && !SealedUse(load, name, plain_methods)) refuse(load.node, name, "class");
  }
  // Every class method's `cls` is a class, maybe a sealed one.
  for (const Method& method : classes_.methods()) {
    if (method.kind != MethodKind::kClassMethod) continue;
    // loads_ is in walk order, so by start byte: only the method's own range.
    uint32_t begin = ts_node_start_byte(method.node), end = ts_node_end_byte(method.node);
    auto first = std::lower_bound(loads_.begin(), loads_.end(), begin, [](const LoadSite& load, uint32_t at) {
      return ts_node_start_byte(load.node) < at;
    });
    for (auto load = first; load != loads_.end() && ts_node_start_byte(load->node) < end; ++load) {
      if (Name(load->node) != method.self) continue;
      if (!SealedUse(*load, method.self, plain_methods)) refuse(load->node, method.self, "class method parameter");
    }
  }
  CheckClassReads(plain_methods);
}

}  // namespace dolsot::sandbox
