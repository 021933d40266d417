// The gate's walk (see cell_checker.h): the frames' stack over the tree, the
// checks of names and attributes, and the facts decided once the cell is seen.
#include "sandbox/cell_checker.h"

#include <algorithm>

#include "core/python_chars.h"
#include "sandbox/prescan.h"
#include "sandbox/rules.h"
#include "sandbox/source_text.h"
#include "sandbox/syntax_findings.h"
#include "sandbox/tree_sitter_handles.h"

namespace dolsot::sandbox {
namespace {

// A parse that takes longer than this is abandoned and the cell rejected.
constexpr uint64_t kParseTimeoutMicros = 20'000'000;
constexpr std::size_t kMaxSyntaxFindings = 5;

}  // namespace

CellChecker::CellChecker(std::string_view code, const Policy& policy, const GateMemory* memory,
                         GateMemory* learned)
    : text_(code), code_(code), policy_(policy), grammar_(Grammar()), memory_(memory),
      learned_(learned),
      plain_methods_allowed_(policy.private_in_plain_methods && memory != nullptr &&
                             memory->complete),
      classes_(code, grammar_), constants_(text_, grammar_) {}

std::vector<Finding> CellChecker::Run(bool fast_path) {
  if (auto problem = CheckSourceText(code_, policy_)) return {std::move(*problem)};
  // Most cells are plain data work: their tokens alone prove them allowed.
  // The fast path knows nothing of the session's sealed names: a cell that
  // may mention one (`A.m(obj)`, `type(a).m`) is walked.
  if (fast_path && !MemoryMentioned() && PrescanProvesAllowed(code_, policy_)) return {};
  TSParser* parser = ThreadPythonParser();
  ts_parser_reset(parser);
  ts_parser_set_timeout_micros(parser, kParseTimeoutMicros);
  TreePtr tree(ts_parser_parse_string(parser, nullptr, code_.data(),
                                      static_cast<uint32_t>(code_.size())));
  if (!tree) {
    return {Finding{Rule::kSourceLimit, "the cell took too long to parse", 1, 1, 0, 0}};
  }
  TSNode root = ts_tree_root_node(tree.get());
  if (ts_node_has_error(root)) {
    for (SyntaxProblem& problem : ParseErrors(root, code_, kMaxSyntaxFindings)) {
      Report(Rule::kSyntaxError, problem.node, std::move(problem.message));
    }
  } else if (std::optional<SyntaxProblem> joined = JoinedLine(root)) {
    Report(Rule::kSyntaxError, joined->node, std::move(joined->message));
  } else {
    Walk(root);
    CheckPendingStores();
    CheckPendingFacts();
    CheckPendingPatterns();
    // Refused already: no need to ask CPython (it costs about one ast.parse).
    if (policy_.statement_oracle && findings_.empty() && dropped_ == 0) {
      if (std::optional<SyntaxProblem> problem =
              CpythonDisagreement(root, code_, policy_.statement_oracle)) {
        Report(Rule::kSyntaxError, problem->node, std::move(problem->message));
      }
    }
  }
  std::sort(findings_.begin(), findings_.end(), [](const Finding& a, const Finding& b) {
    return a.start_byte < b.start_byte;
  });
  if (dropped_ > 0) {
    Finding more = findings_.back();
    more.message = std::to_string(dropped_) + " more finding(s) not shown";
    findings_.push_back(std::move(more));
  }
  return std::move(findings_);
}

std::string CellChecker::Spelled(TSNode node, std::string_view name) const {
  std::string_view raw = Text(node);
  std::string out = "`" + std::string(name) + "`";
  if (raw != name) out += " (spelled `" + std::string(raw) + "`)";
  return out;
}

void CellChecker::Report(Rule rule, TSNode node, std::string message) {
  if (Full()) {
    ++dropped_;
    return;
  }
  uint32_t start = ts_node_start_byte(node);
  TSPoint point = ts_node_start_point(node);
  findings_.push_back(Finding{rule, std::move(message), point.row + 1,
                              CodePointColumn(code_, start, point.column), start,
                              ts_node_end_byte(node)});
}

// A name the session's memory holds appears in the cell's bytes, not glued to
// another ASCII letter, digit or underscore (a superset of the identifiers
// spelled that way: the fast path takes ASCII identifiers only, and one ends
// where its bytes do).
bool CellChecker::MemoryMentioned() const {
  if (memory_ == nullptr) return false;
  for (const GateMemory::Names* names : {&memory_->sealed_classes, &memory_->sealed_methods}) {
    for (const std::string& name : *names) {
      for (std::size_t at = code_.find(name); at != std::string_view::npos;
           at = code_.find(name, at + 1)) {
        const std::size_t end = at + name.size();
        if ((at == 0 || !IsAsciiNameChar(code_[at - 1])) && (end == code_.size() || !IsAsciiNameChar(code_[end]))) {
          return true;
        }
      }
    }
  }
  return false;
}

void CellChecker::Walk(TSNode root) {
  TreeCursor cursor(root);
  std::vector<Frame> stack;
  stack.push_back(Frame{});  // above the module
  while (true) {
    TSTreeCursor* c = cursor.get();
    TSNode node = ts_tree_cursor_current_node(c);
    Frame& parent = stack.back();
    bool descend = false;
    Frame frame;
    if (ts_node_is_named(node)) {
      // Looking a field up costs a search; only parents whose roles depend on
      // fields need it.
      TSFieldId field = RoleDependsOnField(parent.kind) ? ts_tree_cursor_current_field_id(c) : 0;
      frame = DeriveFrame(parent, grammar_.KindOf(node), field, grammar_);
      if (frame.kind == NodeKind::kIdentifier) ++parent.identifiers;
      descend = Visit(node, frame);
    } else if (parent.kind == NodeKind::kAsPattern && Text(node) == "as") {
      parent.after_as = true;
    }
    if (descend && stack.size() > policy_.max_depth) {
      Report(Rule::kSourceLimit, node,
             "the cell is nested deeper than " + std::to_string(policy_.max_depth) + " levels");
      return;
    }
    if (descend && ts_tree_cursor_goto_first_child(c)) {
      stack.push_back(frame);
      continue;
    }
    while (!ts_tree_cursor_goto_next_sibling(c)) {
      if (!ts_tree_cursor_goto_parent(c)) return;
      stack.pop_back();
    }
  }
}

// Checks one named node; returns whether to walk into its children.
bool CellChecker::Visit(TSNode node, Frame& frame) {
  switch (frame.kind) {
    case NodeKind::kIdentifier:
      CheckIdentifier(node, frame);
      return false;
    case NodeKind::kImportStatement:
    case NodeKind::kImportFromStatement:
    case NodeKind::kFutureImportStatement:
      CheckImport(node, frame);
      return false;
    case NodeKind::kPrintStatement:
    case NodeKind::kExecStatement:
      Report(Rule::kSyntaxError, node, "a Python 2 statement: the cell does not parse as Python 3");
      return false;
    case NodeKind::kComment:
      return false;
    case NodeKind::kFunctionDefinition:
      EnterFunction(node, frame);
      return true;
    case NodeKind::kClassDefinition:
      EnterClass(node, frame);
      return true;
    case NodeKind::kAssignment:
    case NodeKind::kForStatement:
    case NodeKind::kForInClause:
      NoteAssignment(ts_node_child_by_field_id(node, grammar_.left),
                     ts_node_child_by_field_id(node, grammar_.right));
      if (frame.kind != NodeKind::kAssignment) CheckSuspension(node, frame);  // `async for`
      return true;
    case NodeKind::kCall:
      CheckCall(node, frame);
      return true;
    case NodeKind::kBinaryOperator:
    case NodeKind::kAugmentedAssignment:
      CheckConstantSize(node);
      return true;
    case NodeKind::kTryStatement:
    case NodeKind::kWithStatement:
      CheckSuspension(node, frame);
      frame.cleanup_pending = true;
      return true;
    case NodeKind::kYield:
    case NodeKind::kAwait:
      CheckSuspension(node, frame);
      return true;
    case NodeKind::kSubscript:
      // `m.table[k] = v`, `del m.table[k]`: a store into what a module holds.
      if (frame.role == Role::kBind || frame.role == Role::kDelete ||
          frame.role == Role::kCompBind) {
        RecordStore(node, ts_node_child_by_field_id(node, grammar_.value));
      }
      return true;
    case NodeKind::kString:
    case NodeKind::kConcatenatedString:
      if (frame.in_annotation) {
        CheckStringAnnotation(node);
        return false;
      }
      return true;
    case NodeKind::kExceptGroupClause:
      Report(Rule::kConstructDenied, node,
             "`except*` is not allowed (a user-defined ExceptionGroup confuses CPython 3.11's "
             "types): catch the group with `except ExceptionGroup` and look at `.exceptions`");
      return true;
    case NodeKind::kTypeAliasStatement: {
      // CPython's alias is `type NAME[params] = ...`. tree-sitter also reads
      // `type[1]\n[math.pi] = [1]` (two statements for CPython: a subscript,
      // then a store into math) as one alias whose left side is an
      // expression: fail closed on anything but a name or a generic name.
      TSNode left = ts_node_child_by_field_id(node, grammar_.left);
      TSNode name = ts_node_is_null(left) ? left : ts_node_named_child(left, 0);
      if (!ts_node_is_null(name) && std::string_view(ts_node_type(name)) == "generic_type") {
        name = ts_node_named_child(name, 0);
      }
      if (ts_node_is_null(name) || grammar_.KindOf(name) != NodeKind::kIdentifier ||
          ts_node_named_child_count(left) != 1) {
        Report(Rule::kSyntaxError, node,
               "a `type` statement tree-sitter reads differently from CPython");
        return false;
      }
      return true;
    }
    case NodeKind::kDottedName:
      frame.identifier_count = ts_node_named_child_count(node);
      return true;
    case NodeKind::kAttribute: {
      // A comprehension's attribute targets store into real objects too; only
      // its name targets are local to it.
      if (frame.role == Role::kBind || frame.role == Role::kDelete ||
          frame.role == Role::kCompBind) {
        RecordStore(node, ts_node_child_by_field_id(node, grammar_.object));
      }
      frame.skip_attribute = CheckSelfAttribute(node, frame) || CheckSuperDunder(node, frame);
      NoteClassRead(node, frame);
      TSNode name = ts_node_child_by_field_id(node, grammar_.attribute);
      if (!ts_node_is_null(name)) {
        std::string_view attribute = Name(name);
        TSNode object = ts_node_child_by_field_id(node, grammar_.object);
        if (IsExceptionCarrier(attribute)) {
          carriers_.push_back(PendingRoot{ChainRoot(object), node, std::string(attribute)});
          attribute = Name(name);
        }
        bool store = frame.role == Role::kBind || frame.role == Role::kDelete ||
                     frame.role == Role::kCompBind;
        if (store && (attribute == "split" || attribute == "derive" || attribute == "subgroup")) {
          Report(Rule::kConstructDenied, node,
                 "assigning `." + std::string(attribute) + "`: `except*` calls an exception "
                 "group's split() and derive() and CPython 3.11 trusts what they return");
          attribute = Name(name);
        }
        if (IsDeniedModuleLeaf(attribute) && grammar_.KindOf(object) == NodeKind::kIdentifier) {
          std::string leaf(attribute);
          paths_.push_back(PendingPath{std::string(Name(object)), std::move(leaf), node});
          attribute = Name(name);
        }
        if (attribute == "format" || attribute == "format_map") {
          CheckFormatReceiver(node, ts_node_child_by_field_id(node, grammar_.object));
        }
      }
      return true;
    }
    default:
      return true;
  }
}

void CellChecker::CheckIdentifier(TSNode node, const Frame& frame) {
  std::string name(Name(node));
  if (frame.in_bases && (name == "ExceptionGroup" || name == "BaseExceptionGroup")) {
    Report(Rule::kConstructDenied, node,
           "subclassing " + Spelled(node, name) + " is not allowed (CPython 3.11 trusts its "
           "subclasses' derive()): raise and catch ExceptionGroup itself");
  }
  bool binds = frame.role == Role::kBind || frame.role == Role::kCompBind ||
               frame.role == Role::kDelete || frame.role == Role::kGlobalDecl ||
               frame.role == Role::kPattern;
  if (binds && frame.self_slot >= 0) {
    Method& method = classes_.method(frame.self_slot);
    if (name == "super") method.binds_super = true;
    if (name == method.self) method.rebinds_self = true;
    if (name == method.self && method.kind != MethodKind::kRegular &&
        method.kind != MethodKind::kClassMethod && method.kind != MethodKind::kOther) {
      Report(Rule::kPrivateAttribute, node,
             "rebinding " + Spelled(node, name) + " in a method: `self._x` is allowed only on "
             "the method's own first parameter");
    }
  }
  bool module_binding = (binds && frame.role != Role::kCompBind && frame.scope == Scope::kModule) ||
                        frame.role == Role::kGlobalDecl;
  if (module_binding && !frame.class_name) {
    facts_.NoteBinding(name, ts_node_start_byte(node), CellFacts::Source::kOther);
  }
  if (frame.except_alias && frame.role == Role::kBind) caught_.insert(name);
  if (frame.role == Role::kGlobalDecl) declared_.insert(name);
  // A parameter, a local or a class attribute named like a builtin: uses that
  // rely on the builtin (`print(e.args)`, `isinstance(v, type)`) are not.
  if ((binds && (frame.scope != Scope::kModule || frame.role == Role::kCompBind)) ||
      frame.role == Role::kParam) {
    shadowed_.insert(name);
  }
  bool load = frame.role == Role::kLoad || frame.role == Role::kDottedLoad;
  if (load) loads_.push_back(LoadSite{node, frame.in_bases, frame.except_type, frame.in_annotation});
  bool callee = plain_callees_.contains(ts_node_start_byte(node));
  if (load && name == "type" && !frame.in_annotation && !callee && !frame.type_is_local) {
    // `isinstance(v, type)` / `issubclass(c, (type, int))` only test against it.
    Use use = ClassifyUse(node, grammar_, false);
    bool tested = use.position == UsePosition::kArgument && use.count == 2 && use.index == 1 &&
                  IsBuiltinCallee(use.other, {"isinstance", "issubclass"});
    std::string message =
        "`type` as a value: called with three arguments it makes a class from a dict the "
        "gate cannot see (dunder keys); only `type(x)` and `isinstance(v, type)` are allowed";
    if (!tested) {
      Report(Rule::kConstructDenied, node, std::move(message));
    } else {
      builtin_uses_.push_back(BuiltinUse{std::string(Name(use.other)), node,
                                         Rule::kConstructDenied, std::move(message)});
    }
  }
  if (load && (name == "ExceptionGroup" || name == "BaseExceptionGroup") && !frame.in_bases &&
      !frame.except_type && !callee) {
    Report(Rule::kConstructDenied, node,
           Spelled(node, name) + " as a value (it could become a base class: CPython 3.11 "
           "trusts its subclasses' split()): only raise it (`ExceptionGroup(...)`) or catch it");
  }
  if ((load || frame.role == Role::kAttrName) && name == "deepcopy" && !callee) {
    Report(Rule::kConstructDenied, node,
           "`deepcopy` as a value (it could be called with a memo, which substitutes objects "
           "inside the copy): call `copy.deepcopy(x)` directly");
  }
  if (load && name == "io") CheckIoModuleUse(node);
  if (IsIoClassName(name) && (load || frame.role == Role::kAttrName)) {
    TSNode parent = ts_node_parent(node);
    CheckIoClassUse(frame.role == Role::kAttrName && grammar_.KindOf(parent) == NodeKind::kAttribute
                        ? parent : node);
  }
  switch (frame.role) {
    case Role::kAttrName:
      if (frame.skip_attribute) return;
      if (frame.pattern_keyword && IsExceptionCarrier(name)) {
        carriers_.push_back(PendingRoot{"", node, name});
      }
      CheckAttribute(node, name, "attribute");
      return;
    case Role::kKeywordName:
      return;
    case Role::kParam:
      // A parameter only shadows: `def f(input=None)` is fine, while every
      // read of a denied name (`input(...)`) is still rejected where it occurs.
      if (IsDunder(name) && !policy_.allowed_dunders.contains(name)) CheckName(node, name);
      return;
    case Role::kLoad:
    case Role::kDottedLoad:
    case Role::kCompBind:
      CheckName(node, name);
      return;
    case Role::kBind:
    case Role::kPattern:
      // A class body's `open: float` is a class attribute (a dataclass field),
      // not the builtin: only reads of denied names matter there.
      if (frame.role == Role::kBind && frame.scope == Scope::kClass && !IsDunder(name) &&
          IsAlwaysDeniedName(name)) {
        return;
      }
      if (CheckName(node, name)) CheckBinding(node, name, frame.scope, "binding");
      return;
    case Role::kDelete:
      if (CheckName(node, name)) CheckBinding(node, name, frame.scope, "deleting");
      return;
    case Role::kGlobalDecl:
      // `global print` makes a later assignment in any scope rebind the builtin.
      if (CheckName(node, name)) CheckBinding(node, name, Scope::kModule, "declaring global");
      return;
  }
}

// Names read or bound: the fixed denied list, the policy's, and dunders.
bool CellChecker::CheckName(TSNode node, std::string_view name) {
  if (IsAlwaysDeniedName(name) || policy_.denied_names.contains(name)) {
    Report(Rule::kNameDenied, node, "name " + Spelled(node, name) + " is denied");
    return false;
  }
  if (IsDunder(name) && !policy_.allowed_dunders.contains(name)) {
    Report(Rule::kDunderName, node, "dunder name " + Spelled(node, name) + " is not allowed");
    return false;
  }
  return true;
}

// Why attribute `name` is denied, or nullopt when it is allowed.
std::optional<std::pair<Rule, std::string_view>> CellChecker::AttributeVerdict(
    std::string_view name) const {
  using Verdict = std::pair<Rule, std::string_view>;
  if ((IsAlwaysDeniedName(name) && !IsDeniedOnlyAsName(name)) ||
      policy_.denied_names.contains(name)) {
    return Verdict{Rule::kNameDenied, "is denied"};
  }
  if (IsInternalAttribute(name)) return Verdict{Rule::kInternalAttribute, "reaches interpreter internals"};
  if (IsDunder(name)) {
    if (!policy_.allowed_dunders.contains(name)) {
      return Verdict{Rule::kDunderAttribute, "is not an allowed dunder"};
    }
    if (IsDataDunder(name)) return std::nullopt;
    // `A.__init__(obj)` runs a method on any object, a toolbox's included.
    return Verdict{Rule::kDunderAttribute,
                   "is a method Python calls on instances itself: use the builtin (`len(x)`, "
                   "`next(it)`, `repr(x)`), or call it as `super().<name>(...)` inside a "
                   "__dunder__ method"};
  }
  if (IsPublicUnderscoreAttribute(name)) return std::nullopt;  // namedtuple's API
  if (name.starts_with("_")) return Verdict{Rule::kPrivateAttribute, "is private"};
  if (name == "register_dialect" || name == "unregister_dialect" || name == "field_size_limit") {
    return Verdict{Rule::kAttributeDenied,
                   "changes csv for the whole process (every csv reader of the host too)"};
  }
  if (IsDeniedAttribute(name)) return Verdict{Rule::kAttributeDenied, "leads to a module or runs code"};
  return std::nullopt;
}

bool CellChecker::CheckAttribute(TSNode node, std::string_view name, std::string_view context) {
  auto verdict = AttributeVerdict(name);
  if (!verdict) return true;
  Report(verdict->first, node,
         std::string(context) + " " + Spelled(node, name) + " " + std::string(verdict->second));
  return false;
}

void CellChecker::CheckBinding(TSNode node, std::string_view name, Scope scope,
                               std::string_view verb) {
  if (scope != Scope::kModule) return;  // local and class scopes shadow, never rebind
  if (IsBuiltinName(name)) {
    Report(Rule::kRebindBuiltin, node,
           std::string(verb) + " builtin " + Spelled(node, name) + " at module level");
  } else if (policy_.toolbox_aliases.contains(name)) {
    Report(Rule::kRebindToolbox, node,
           std::string(verb) + " toolbox alias " + Spelled(node, name));
  }
}

// The name at the root of `a.b[c](d).e`: what a value is read from.
std::string CellChecker::ChainRoot(TSNode node) {
  for (std::size_t steps = 0; steps <= policy_.max_depth && !ts_node_is_null(node); ++steps) {
    switch (grammar_.KindOf(node)) {
      case NodeKind::kIdentifier:
        return std::string(Name(node));
      case NodeKind::kAttribute:
        node = ts_node_child_by_field_id(node, grammar_.object);
        break;
      case NodeKind::kSubscript:
        node = ts_node_child_by_field_id(node, grammar_.value);
        break;
      case NodeKind::kCall:
        node = ts_node_child_by_field_id(node, grammar_.function);
        break;
      case NodeKind::kParenthesizedExpression:
        node = ts_node_named_child(node, 0);
        break;
      default:
        return {};
    }
  }
  return {};
}

// `x = e` / `for x in e.exceptions`: x may hold what the root of the value holds.
void CellChecker::NoteAssignment(TSNode target, TSNode value) {
  if (ts_node_is_null(target) || ts_node_is_null(value)) return;
  if (grammar_.KindOf(target) != NodeKind::kIdentifier) return;
  NodeKind value_kind = grammar_.KindOf(value);
  if (value_kind == NodeKind::kString || value_kind == NodeKind::kConcatenatedString) {
    string_bindings_[std::string(Name(target))].push_back(value);  // a pattern by name (slow-pattern)
  }
  std::string root = ChainRoot(value);
  if (!root.empty()) facts_.NoteAlias(std::string(Name(target)), std::move(root));
}

bool CellChecker::IsBuiltinCallee(TSNode callee, std::initializer_list<std::string_view> names) {
  if (ts_node_is_null(callee) || grammar_.KindOf(callee) != NodeKind::kIdentifier) return false;
  std::string_view name = Name(callee);
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A value shown and dropped: the only argument of str/repr/len/ascii
// (any positional argument of print), or an f-string field. Records the
// builtin it relies on; false when the use is anything else.
bool CellChecker::ShownOnly(const Use& use, TSNode node, Rule rule, std::string message) {
  if (use.position == UsePosition::kInterpolation) return true;
  if (use.position != UsePosition::kArgument || use.in_tuple) return false;
  bool shown = IsBuiltinCallee(use.other, {"print"}) ||
               (use.count == 1 && IsBuiltinCallee(use.other, {"str", "repr", "len", "ascii"}));
  if (!shown) return false;
  builtin_uses_.push_back(BuiltinUse{std::string(Name(use.other)), node, rule, std::move(message)});
  return true;
}

// A value used where it cannot be kept or handed to the cell's code: shown
// (ShownOnly), tested for truth, an operand of `is`, compared with literals
// only, the object of `isinstance(x, ...)`, or a whole expression statement.
bool CellChecker::InPlaceOnly(const Use& use, TSNode node, Rule rule, const std::string& message) {
  switch (use.position) {
    case UsePosition::kTest:
    case UsePosition::kIdentity:
    case UsePosition::kStatement:
      return true;
    case UsePosition::kEquality:
    case UsePosition::kComparison:
      return use.literal_operands;
    case UsePosition::kArgument:
      if (!use.in_tuple && use.index == 0 && use.count == 2 &&
          IsBuiltinCallee(use.other, {"isinstance"})) {
        builtin_uses_.push_back(BuiltinUse{std::string(Name(use.other)), node, rule, message});
        return true;
      }
      return ShownOnly(use, node, rule, message);
    default:
      return ShownOnly(use, node, rule, message);
  }
}

// The rules decided once the cell is seen: own classes, super() routes,
// caught exceptions and their aliases, bases rooted at a toolbox.
void CellChecker::CheckPendingFacts() {
  CheckMethodAccesses();
  CheckOwnMethods();
  NameSet caught = facts_.ResolveAliases(caught_);
  for (const PendingRoot& carrier : carriers_) {
    bool from_exception = carrier.root.empty() ? !caught.empty() : caught.contains(carrier.root);
    if (!from_exception) continue;
    std::string message = "`." + carrier.what + "` of a caught exception can hand back objects "
                          "of the code that raised it (a toolbox's internals): use it in place "
                          "only (`print(e." + carrier.what + ")`, `str(...)`, `repr(...)`, "
                          "`len(...)`, an f-string field, `if e." + carrier.what + ":`, "
                          "compared with literals, `isinstance(e." + carrier.what + "[0], str)`), "
                          "or use `str(e)`";
    Use use = carrier.root.empty() ? Use{} : ClassifyUse(carrier.node, grammar_, true);
    if (!InPlaceOnly(use, carrier.node, Rule::kAttributeDenied, message)) {
      Report(Rule::kAttributeDenied, carrier.node, std::move(message));
    }
  }
  NameSet host = host_names_;
  host.insert(policy_.toolbox_aliases.begin(), policy_.toolbox_aliases.end());
  host.insert("type");
  host = facts_.ResolveAliases(std::move(host));
  for (const PendingRoot& base : bases_) {
    if (host.contains(base.root) && base.root != "type") {
      Report(Rule::kConstructDenied, base.node,
             "class `" + base.what + "` derives from `" + base.root + "`, a toolbox's class or "
             "one `type()` returned: its instances would skip that class's __init__ and "
             "validation; use the toolbox's own constructors");
    }
  }
  for (const BuiltinUse& use : builtin_uses_) {
    if (use.own_class_too && facts_.IsOwnClassName(use.callee)) continue;
    if (IsBuiltinName(use.callee) && !shadowed_.contains(use.callee)) continue;
    if (!IsBuiltinName(use.callee)) {
      Report(use.rule, use.node, use.message);
      continue;
    }
    Report(use.rule, use.node, use.message + " (here `" + use.callee + "` is bound in the cell, "
           "so it may not be the builtin)");
  }
}

}  // namespace dolsot::sandbox
