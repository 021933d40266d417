// CellChecker, the gate's check of one cell (check_cell.h is its API): one
// iterative walk over the tree-sitter tree with a stack of frames
// (scope_frame.h), the checks each node gets, and the rules decided once the
// whole cell is seen. Internal to sandbox/. rules.h names what each check rejects.
#pragma once

#include <tree_sitter/api.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/gate_memory.h"
#include "sandbox/cell_facts.h"
#include "sandbox/constant_size.h"
#include "sandbox/class_model.h"
#include "sandbox/finding.h"
#include "sandbox/node_text.h"
#include "sandbox/policy.h"
#include "sandbox/python_grammar.h"
#include "sandbox/scope_frame.h"
#include "sandbox/use_position.h"

namespace dolsot::sandbox {

// A name read as a value, with what the walk knew of its place: rules decided
// at the end (sealed classes, a classmethod's `cls`) classify the rest.
struct LoadSite {
  TSNode node;
  bool base = false;         // among a class statement's bases
  bool except_type = false;  // an except clause's exception types
  bool annotation = false;   // inside an annotation
};

// A use that is harmless only if `callee` is the builtin of that name (print,
// str, isinstance, ...): reported at the end when the cell binds that name
// anywhere (a parameter, a local, a class attribute).
struct BuiltinUse {
  std::string callee;
  TSNode node;
  Rule rule;
  std::string message;
  bool own_class_too = false;  // `type(x) == C`: C may also be an own class (metaclass `type`)
};

struct PendingAccess {  // `self._x` or `super().__x__` in a method, decided at the end
  TSNode node;
  std::int32_t method = -1;  // its ClassModel slot
  bool private_attribute = true;  // else a dunder through super()
};

struct PendingRoot {  // an attribute or base whose root name is decided at the end
  std::string root;
  TSNode node;
  std::string what;
};

struct PendingStore {  // an attribute assignment/deletion whose root is a name
  std::string root;
  TSNode node;
  bool mutation = false;  // a mutating method call (modules only, not toolboxes)
};

struct PendingPattern {  // `f(name, ...)`: a regex function's pattern given by name, decided at the end
  std::string callee;   // empty: the call's callee is a regex function whatever it binds
  std::string pattern;  // the name holding the pattern
  TSNode node;
};

struct PendingPath {  // `root.leaf` where leaf may name a denied submodule
  std::string root;
  std::string leaf;
  TSNode node;
};

// One cell, one use: Run once. The checks live in one .cc per concern:
// cell_checker.cc (the walk, names, attributes, the end-of-cell facts),
// cell_checker_imports.cc (imports, stores into modules),
// cell_checker_calls.cc (calls that make classes, `type(x)`),
// cell_checker_strings.cc (code inside strings: format templates, annotations),
// cell_checker_classes.cc (methods, `self._x`, sealed classes),
// cell_checker_deadline.cc (what holds the GIL or runs later: slow regexes,
// huge constants, deferred cleanup code).
class CellChecker {
 public:
  CellChecker(std::string_view code, const Policy& policy, const GateMemory* memory = nullptr,
              GateMemory* learned = nullptr);

  // The cell's findings; with `fast_path`, a cell the prescan proves allowed is not parsed.
  std::vector<Finding> Run(bool fast_path);

 private:
  std::string_view Text(TSNode node) const { return text_.Text(node); }
  // The NFKC-folded name of an identifier node (valid until the next call).
  std::string_view Name(TSNode node) { return text_.Name(node); }
  std::string Spelled(TSNode node, std::string_view name) const;

  void Report(Rule rule, TSNode node, std::string message);
  bool Full() const { return findings_.size() >= policy_.max_findings; }
  bool MemoryMentioned() const;

  // cell_checker.cc: the walk, names and attributes.
  void Walk(TSNode root);
  bool Visit(TSNode node, Frame& frame);
  void CheckIdentifier(TSNode node, const Frame& frame);
  bool CheckName(TSNode node, std::string_view name);
  std::optional<std::pair<Rule, std::string_view>> AttributeVerdict(std::string_view name) const;
  bool CheckAttribute(TSNode node, std::string_view name, std::string_view context);
  void CheckBinding(TSNode node, std::string_view name, Scope scope, std::string_view verb);
  std::string ChainRoot(TSNode node);
  void NoteAssignment(TSNode target, TSNode value);
  bool IsBuiltinCallee(TSNode callee, std::initializer_list<std::string_view> names);
  bool ShownOnly(const Use& use, TSNode node, Rule rule, std::string message);
  bool InPlaceOnly(const Use& use, TSNode node, Rule rule, const std::string& message);
  void CheckPendingFacts();

  // cell_checker_imports.cc
  void CheckImport(TSNode node, const Frame& frame);
  bool IsToolboxModule(std::string_view dotted) const;
  std::string DottedPath(TSNode dotted, bool check_components);
  void RecordStore(TSNode store, TSNode object, bool mutation = false);
  void CheckPendingStores();
  bool CheckIoImport(TSNode target, TSNode alias, std::string_view from_path, std::string_view name);
  void CheckIoModuleUse(TSNode node);
  void CheckIoClassUse(TSNode expression);

  // cell_checker_calls.cc
  void CheckCall(TSNode call, const Frame& frame);
  void CheckTypeResultUse(TSNode call);
  bool TypeResultInBuiltins(TSNode call, const std::string& message);

  // cell_checker_strings.cc
  void CheckStringAnnotation(TSNode string);
  void CheckFormatReceiver(TSNode attribute, TSNode receiver);

  // cell_checker_deadline.cc
  void CheckPatternCall(TSNode call, TSNode function, std::string_view callee);
  void CheckPattern(TSNode pattern);
  void CheckPendingPatterns();
  void CheckConstantSize(TSNode node);
  void CheckSuspension(TSNode node, const Frame& frame);

  // cell_checker_classes.cc
  void EnterFunction(TSNode node, Frame& frame);
  void EnterClass(TSNode node, Frame& frame);
  bool CheckSelfAttribute(TSNode attribute, const Frame& frame);
  bool CheckSuperDunder(TSNode attribute, const Frame& frame);
  void NoteClassRead(TSNode attribute, const Frame& frame);
  bool SafeClassDecorator(TSNode decorator, std::uint32_t class_start);
  bool SealedUse(const LoadSite& load, std::string_view name, const NameSet& plain_methods);
  void CheckClassReads(const NameSet& plain_methods);
  void CheckMethodAccesses();
  void CheckOwnMethods();

  NodeText text_;
  std::string_view code_;
  const Policy& policy_;
  const PythonGrammar& grammar_;
  const GateMemory* memory_;  // the session's earlier cells (null: a standalone cell)
  GateMemory* learned_;       // what this cell seals, when it is allowed (may be null)
  bool plain_methods_allowed_;
  std::vector<Finding> findings_;
  std::size_t dropped_ = 0;
  NameSet imported_names_;
  std::map<std::string, std::string, std::less<>> imported_modules_;  // bound name -> module
  std::vector<PendingStore> stores_;
  std::vector<PendingPath> paths_;
  ClassModel classes_;
  CellFacts facts_;
  std::vector<PendingAccess> accesses_;
  std::vector<PendingRoot> carriers_;   // `e.args` and the like: root may hold an exception
  std::vector<PendingRoot> bases_;      // class bases: root may be a toolbox's class
  NameSet caught_;                      // names bound to a caught exception
  NameSet host_names_;                  // names imported from a toolbox
  std::set<std::uint32_t> plain_callees_;  // `type` / `ExceptionGroup` as a call's callee
  std::vector<LoadSite> loads_;         // every name read, for the sealed-class rules
  std::vector<std::pair<TSNode, std::int32_t>> class_reads_;  // `type(x).m`, `super().m`: see NoteClassRead
  std::vector<BuiltinUse> builtin_uses_;
  NameSet shadowed_;                    // builtin names the cell binds outside the module scope
  NameSet declared_;                    // names of global / nonlocal statements
  ConstantSizes constants_;             // folded constant expressions (huge-constant)
  std::vector<PendingPattern> patterns_;  // regex patterns given by name
  std::map<std::string, std::vector<TSNode>, std::less<>> string_bindings_;  // name = "literal"
};

}  // namespace dolsot::sandbox
