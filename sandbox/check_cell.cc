// The gate's tree walk: one iterative pass over the tree-sitter tree with a
// stack of frames that know each node's role (load, bind, parameter, ...) and
// scope (module, function, class); rules.h names what each check rejects.
#include "sandbox/check_cell.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "sandbox/cell_facts.h"
#include "sandbox/format_template.h"
#include "sandbox/identifier.h"
#include "sandbox/line_structure.h"
#include "sandbox/prescan.h"
#include "sandbox/python_grammar.h"
#include "sandbox/source_text.h"
#include "sandbox/tree_sitter_handles.h"
#include "sandbox/use_position.h"

namespace dolsot::sandbox {
namespace {

// A parse that takes longer than this is abandoned and the cell rejected.
constexpr uint64_t kParseTimeoutMicros = 20'000'000;
constexpr std::size_t kMaxSyntaxFindings = 5;

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
  std::int32_t class_slot = -1;    // the innermost class statement (CellFacts index), or -1
  std::int32_t self_slot = -1;     // the enclosing method (methods_), or -1
  std::int32_t method_self = -1;   // a function definition: its own methods_ entry, or -1
};

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
  std::int32_t method = -1;
  bool private_attribute = true;  // else a dunder through super()
};

struct PendingRoot {  // an attribute or base whose root name is decided at the end
  std::string root;
  TSNode node;
  std::string what;
};

// type(), enum classes called with names: both make classes from data.
bool IsEnumClassName(std::string_view name) {
  return name == "Enum" || name == "IntEnum" || name == "StrEnum" || name == "Flag" ||
         name == "IntFlag" || name == "ReprEnum";
}

// `a.b.c` of ASCII identifiers: what a string annotation may hold.
bool IsDottedIdentifierChain(std::string_view text) {
  if (text.empty()) return false;
  bool start = true;
  for (char c : text) {
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (c == '.') {
      if (start) return false;
      start = true;
    } else if (alpha || (!start && c >= '0' && c <= '9')) {
      start = false;
    } else {
      return false;
    }
  }
  return !start;
}

struct PendingStore {  // an attribute assignment/deletion whose root is a name
  std::string root;
  TSNode node;
  bool mutation = false;  // a mutating method call (modules only, not toolboxes)
};

struct PendingPath {  // `root.leaf` where leaf may name a denied submodule
  std::string root;
  std::string leaf;
  TSNode node;
};

// Parents whose children's roles depend on the child's field (see Derive).
bool NeedsField(NodeKind kind) {
  switch (kind) {
    case NodeKind::kAssignment:
    case NodeKind::kAugmentedAssignment:
    case NodeKind::kForStatement:
    case NodeKind::kTypeAliasStatement:
    case NodeKind::kForInClause:
    case NodeKind::kNamedExpression:
    case NodeKind::kAsPattern:
    case NodeKind::kFunctionDefinition:
    case NodeKind::kClassDefinition:
    case NodeKind::kLambda:
    case NodeKind::kDefaultParameter:
    case NodeKind::kTypedDefaultParameter:
    case NodeKind::kTypedParameter:
    case NodeKind::kAttribute:
    case NodeKind::kKeywordArgument:
    case NodeKind::kDictPattern:
      return true;
    default:
      return false;
  }
}

class CellChecker {
 public:
  CellChecker(std::string_view code, const Policy& policy, const GateMemory* memory = nullptr,
              GateMemory* learned = nullptr)
      : code_(code), policy_(policy), grammar_(Grammar()), memory_(memory), learned_(learned),
        plain_methods_allowed_(policy.private_in_plain_methods && memory != nullptr &&
                               memory->complete) {}

  std::vector<Finding> Run(bool fast_path);

 private:
  std::string_view Text(TSNode node) const {
    uint32_t start = ts_node_start_byte(node), end = ts_node_end_byte(node);
    return code_.substr(start, end - start);
  }
  // The NFKC-folded name of an identifier node (valid until the next call).
  std::string_view Name(TSNode node) { return NormalizeIdentifier(Text(node), scratch_); }
  std::string Spelled(TSNode node, std::string_view name) const;

  void Report(Rule rule, TSNode node, std::string message);
  void ReportSyntaxErrors(TSNode root);
  bool Full() const { return findings_.size() >= policy_.max_findings; }

  void Walk(TSNode root);
  Frame Derive(const Frame& parent, NodeKind kind, TSFieldId field) const;
  bool Visit(TSNode node, Frame& frame);

  void CheckIdentifier(TSNode node, const Frame& frame);
  bool CheckName(TSNode node, std::string_view name);
  std::optional<std::pair<Rule, std::string_view>> AttributeVerdict(std::string_view name) const;
  bool CheckAttribute(TSNode node, std::string_view name, std::string_view context);
  void CheckBinding(TSNode node, std::string_view name, Scope scope, std::string_view verb);
  void CheckImport(TSNode node, const Frame& frame);
  bool IsToolboxModule(std::string_view dotted) const;
  std::string DottedPath(TSNode dotted, bool check_components);
  void RecordStore(TSNode store, TSNode object, bool mutation = false);
  void CheckCall(TSNode call, const Frame& frame);
  void CheckTypeResultUse(TSNode call);
  bool TypeResultInBuiltins(TSNode call, const std::string& message);
  void CheckStringAnnotation(TSNode string);
  void EnterFunction(TSNode node, Frame& frame);
  void EnterClass(TSNode node, Frame& frame);
  bool CheckSelfAttribute(TSNode attribute, const Frame& frame);
  bool CheckSuperDunder(TSNode attribute, const Frame& frame);
  void NoteClassRead(TSNode attribute, const Frame& frame);
  std::string ChainRoot(TSNode node);
  void NoteAssignment(TSNode target, TSNode value);
  struct ClassBody {
    std::map<std::string, int, std::less<>> mentions, defs, property_defs;
  };
  const ClassBody& BodyOf(TSNode class_node);
  void CountNames(TSNode node, std::map<std::string, int, std::less<>>& counts);
  bool ClassBodyMentions(const Method& method, std::string_view name);
  bool InstanceOnly(std::int32_t slot);
  bool FamilyIsOwn(std::int32_t class_index);
  bool SealedUse(const LoadSite& load, std::string_view name, const NameSet& plain_methods);
  void CheckClassReads(const NameSet& plain_methods);
  void CheckPendingFacts();
  void CheckOwnMethods();
  bool SafeClassDecorator(TSNode decorator, std::uint32_t class_start);
  bool ShownOnly(const Use& use, TSNode node, Rule rule, std::string message);
  bool IsBuiltinCallee(TSNode callee, std::initializer_list<std::string_view> names);
  void CheckFormatReceiver(TSNode attribute, TSNode receiver);
  bool AppendLiteral(TSNode string, std::string& decoded, std::string& problem);
  void CheckPendingStores();
  void CompareWithCpython(TSNode root);
  bool MemoryMentioned() const;

  std::string_view code_;
  const Policy& policy_;
  const PythonGrammar& grammar_;
  const GateMemory* memory_;  // the session's earlier cells (null: a standalone cell)
  GateMemory* learned_;       // what this cell seals, when it is allowed (may be null)
  bool plain_methods_allowed_;
  std::vector<Finding> findings_;
  std::size_t dropped_ = 0;
  std::string scratch_;
  NameSet imported_names_;
  std::map<std::string, std::string, std::less<>> imported_modules_;  // bound name -> module
  std::vector<PendingStore> stores_;
  std::vector<PendingPath> paths_;
  std::vector<Method> methods_;
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
  std::vector<TSNode> class_nodes_;  // by CellFacts class index
  std::map<std::int32_t, std::vector<TSNode>> class_decorators_;  // class index -> decorators
  std::map<std::uint32_t, ClassBody> class_bodies_;  // by the class statement's start
};

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
    ReportSyntaxErrors(root);
  } else if (std::optional<uint32_t> joined = FindJoinedLines(root)) {
    Report(Rule::kSyntaxError, ts_node_descendant_for_byte_range(root, *joined, *joined),
           "tree-sitter reads this line as part of the line before, CPython does not: "
           "the cell cannot be checked (end the statement before, or wrap it in brackets)");
  } else {
    Walk(root);
    CheckPendingStores();
    CheckPendingFacts();
    // Refused already: no need to ask CPython (it costs about one ast.parse).
    if (policy_.statement_oracle && findings_.empty() && dropped_ == 0) CompareWithCpython(root);
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

void CellChecker::ReportSyntaxErrors(TSNode root) {
  std::size_t reported = 0;
  TreeCursor cursor(root);
  bool descend = true;
  while (reported < kMaxSyntaxFindings) {
    TSNode node = ts_tree_cursor_current_node(cursor.get());
    descend = ts_node_has_error(node);
    if (ts_node_is_missing(node)) {
      Report(Rule::kSyntaxError, node,
             "missing `" + std::string(ts_node_type(node)) + "`: the cell does not parse");
      ++reported;
      descend = false;
    } else if (ts_node_is_error(node)) {
      std::string_view text = Text(node).substr(0, 40);
      std::string shown(text.substr(0, text.find('\n')));
      Report(Rule::kSyntaxError, node, "cannot parse `" + shown + "`: the cell does not parse");
      ++reported;
      descend = false;
    }
    if (descend && ts_tree_cursor_goto_first_child(cursor.get())) continue;
    while (!ts_tree_cursor_goto_next_sibling(cursor.get())) {
      if (!ts_tree_cursor_goto_parent(cursor.get())) {
        if (reported == 0) Report(Rule::kSyntaxError, root, "the cell does not parse");
        return;
      }
    }
  }
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
      TSFieldId field = NeedsField(parent.kind) ? ts_tree_cursor_current_field_id(c) : 0;
      frame = Derive(parent, grammar_.KindOf(node), field);
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

// The role and scope of a named child, from its parent's frame and its field.
Frame CellChecker::Derive(const Frame& parent, NodeKind kind, TSFieldId field) const {
  const PythonGrammar& g = grammar_;
  Frame child{kind, parent.role, parent.scope};
  child.in_annotation = parent.in_annotation || kind == NodeKind::kType;
  child.in_bases = parent.in_bases;
  child.self_slot = parent.self_slot;
  child.class_slot = parent.class_slot;
  child.top_level = parent.kind == NodeKind::kModule ||
                    (parent.kind == NodeKind::kDecoratedDefinition && parent.top_level);
  child.except_type = parent.kind == NodeKind::kExceptClause ? kind != NodeKind::kBlock
                                                             : parent.except_type;
  child.except_alias = parent.except_alias;
  child.type_is_local = parent.type_is_local;
  switch (parent.kind) {
    case NodeKind::kAssignment:
    case NodeKind::kAugmentedAssignment:
    case NodeKind::kForStatement:
    case NodeKind::kTypeAliasStatement:
      child.role = field == g.left ? Role::kBind : Role::kLoad;
      break;
    case NodeKind::kForInClause:
      child.role = field == g.left ? Role::kCompBind : Role::kLoad;
      break;
    case NodeKind::kNamedExpression:
      child.role = field == g.name ? Role::kBind : Role::kLoad;
      break;
    case NodeKind::kAsPattern:
      if (field == g.alias) {
        child.role = Role::kBind;
        child.except_alias = parent.except_type;  // `except E as e`
        child.except_type = false;
      } else if (parent.role == Role::kPattern) {
        child.role = parent.after_as ? Role::kBind : Role::kPattern;
      } else {
        child.role = Role::kLoad;
      }
      break;
    case NodeKind::kFunctionDefinition:
    case NodeKind::kClassDefinition:
    case NodeKind::kLambda:
      child.role = Role::kLoad;
      if (field == g.name) child.role = Role::kBind;
      child.class_name = field == g.name && parent.kind == NodeKind::kClassDefinition;
      if (field == g.parameters) child.role = Role::kParam;
      // Type parameters stay loads: their bounds (`[T: bound]`) are expressions.
      if (field == g.body) {
        child.scope = parent.kind == NodeKind::kClassDefinition ? Scope::kClass : Scope::kFunction;
        child.self_slot = parent.kind == NodeKind::kFunctionDefinition ? parent.method_self : -1;
        child.type_is_local = parent.type_is_local || parent.type_parameter;
        child.in_bases = false;
      }
      if (parent.kind == NodeKind::kClassDefinition && field == g.superclasses) child.in_bases = true;
      break;
    case NodeKind::kDefaultParameter:
    case NodeKind::kTypedDefaultParameter:
      child.role = field == g.name ? Role::kParam : Role::kLoad;
      break;
    case NodeKind::kTypedParameter:
      child.role = field == g.type ? Role::kLoad : Role::kParam;
      break;
    case NodeKind::kAttribute:
      child.role = field == g.attribute ? Role::kAttrName : Role::kLoad;
      child.skip_attribute = field == g.attribute && parent.skip_attribute;
      break;
    case NodeKind::kSubscript:
    case NodeKind::kCall:
      child.role = Role::kLoad;
      break;
    case NodeKind::kKeywordArgument:
      child.role = field == g.name ? Role::kKeywordName : Role::kLoad;
      break;
    case NodeKind::kDeleteStatement:
      child.role = Role::kDelete;
      break;
    case NodeKind::kGlobalStatement:
    case NodeKind::kNonlocalStatement:
      child.role = Role::kGlobalDecl;
      break;
    case NodeKind::kCaseClause:
      child.role = kind == NodeKind::kCasePattern ? Role::kPattern : Role::kLoad;
      break;
    case NodeKind::kClassPattern:
      child.role = kind == NodeKind::kDottedName ? Role::kDottedLoad : Role::kPattern;
      break;
    case NodeKind::kKeywordPattern:
      child.role = (kind == NodeKind::kIdentifier && parent.identifiers == 0) ? Role::kAttrName
                                                                               : Role::kPattern;
      child.pattern_keyword = child.role == Role::kAttrName;
      break;
    case NodeKind::kSplatPattern:
      child.role = Role::kBind;  // *rest / **rest captures
      break;
    case NodeKind::kDictPattern:
      child.role = field == g.key ? Role::kDottedLoad : Role::kPattern;
      break;
    case NodeKind::kDottedName:
      if (parent.identifiers > 0) {
        child.role = Role::kAttrName;
      } else if (parent.role == Role::kPattern && parent.identifier_count == 1) {
        child.role = Role::kBind;  // `case name:` captures
      } else {
        child.role = Role::kLoad;
      }
      break;
    default:
      break;
  }
  return child;
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
      return true;
    case NodeKind::kCall:
      CheckCall(node, frame);
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
    Method& method = methods_[static_cast<std::size_t>(frame.self_slot)];
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
  if (name.starts_with("_")) return Verdict{Rule::kPrivateAttribute, "is private"};
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

// "a.b.c" from a dotted_name; with check_components, every part after the
// first is checked as an attribute (`import collections._x`).
std::string CellChecker::DottedPath(TSNode dotted, bool check_components) {
  std::string path;
  uint32_t count = ts_node_named_child_count(dotted);
  for (uint32_t i = 0; i < count; ++i) {
    TSNode part = ts_node_named_child(dotted, i);
    std::string name(Name(part));
    if (i > 0 && check_components) CheckAttribute(part, name, "module part");
    if (i > 0) path += '.';
    path += name;
  }
  return path;
}

void CellChecker::CheckImport(TSNode node, const Frame& frame) {
  const PythonGrammar& g = grammar_;
  NodeKind kind = frame.kind;
  if (kind == NodeKind::kFutureImportStatement) return;  // compiler flags only
  bool from_import = kind == NodeKind::kImportFromStatement;
  std::string from_path;
  if (from_import) {
    TSNode module = ts_node_child_by_field_id(node, g.module_name);
    if (grammar_.KindOf(module) == NodeKind::kRelativeImport) {
      Report(Rule::kImportDenied, module, "relative import: a cell is not part of a package");
      return;
    }
    std::string path = DottedPath(module, true);
    from_path = path;
    if (!policy_.IsModuleAllowed(path)) {
      Report(Rule::kImportDenied, module, "module `" + path + "` is not in the allow-list");
      return;
    }
  }
  uint32_t count = ts_node_named_child_count(node);
  for (uint32_t i = 0; i < count; ++i) {
    TSNode child = ts_node_named_child(node, i);
    NodeKind child_kind = grammar_.KindOf(child);
    if (child_kind == NodeKind::kWildcardImport) {
      Report(Rule::kImportDenied, child, "wildcard import: it binds names the gate cannot see");
      continue;
    }
    TSNode target = child;  // the dotted_name imported
    TSNode alias{};
    if (child_kind == NodeKind::kAliasedImport) {
      target = ts_node_child_by_field_id(child, g.name);
      alias = ts_node_child_by_field_id(child, g.alias);
    } else if (child_kind != NodeKind::kDottedName) {
      continue;
    }
    if (from_import && ts_node_eq(child, ts_node_child_by_field_id(node, g.module_name))) continue;
    std::string bound;
    if (from_import) {
      // `from m import name`: the name is read from m like an attribute.
      std::string path = DottedPath(target, false);
      if (!CheckAttribute(target, path, "imported name")) continue;
      if (!policy_.IsModuleAllowed(from_path + "." + path)) {  // `from json import tool`
        Report(Rule::kImportDenied, target,
               "module `" + from_path + "." + path + "` is not in the allow-list");
        continue;
      }
      bound = path;
    } else {
      std::string path = DottedPath(target, true);
      if (!policy_.IsModuleAllowed(path)) {
        Report(Rule::kImportDenied, target, "module `" + path + "` is not in the allow-list");
        continue;
      }
      bound = path.substr(0, path.find('.'));
    }
    TSNode bound_node = ts_node_is_null(alias) ? target : alias;
    std::string module = from_import ? from_path + "." + bound : bound;
    if (!from_import && !ts_node_is_null(alias)) module = DottedPath(target, false);
    if (!ts_node_is_null(alias)) bound = std::string(Name(alias));
    bool toolbox = IsToolboxModule(from_import ? from_path : module);
    if (toolbox) host_names_.insert(bound);
    if (frame.scope == Scope::kModule) {
      facts_.NoteBinding(bound, ts_node_start_byte(node),
                         frame.top_level && !toolbox ? CellFacts::Source::kSafeImport
                                                     : CellFacts::Source::kOther);
    }
    imported_modules_[bound] = std::move(module);
    // `import tb` (the toolbox itself, no alias) keeps the alias's meaning.
    bool imports_toolbox_itself = !from_import && ts_node_is_null(alias) &&
                                  policy_.toolbox_aliases.contains(bound);
    if (CheckName(bound_node, bound) && !imports_toolbox_itself) {
      CheckBinding(bound_node, bound, frame.scope, "importing as");
    }
    imported_names_.insert(bound);
  }
}

// `a.b.c` is a toolbox's module or inside one.
bool CellChecker::IsToolboxModule(std::string_view dotted) const {
  for (std::string_view path = dotted; !path.empty();) {
    if (policy_.toolbox_modules.contains(path) || policy_.toolbox_aliases.contains(path)) return true;
    std::size_t dot = path.rfind('.');
    path = dot == std::string_view::npos ? std::string_view() : path.substr(0, dot);
  }
  return false;
}

// An attribute store `obj.a.b = ...` (or del / for / comprehension target):
// records the name at the root of obj. When obj is not a plain name chain -
// `(math).pi`, `(tb or 0).x`, `f(m).x`, `[math][0].pi` - every name inside
// it is recorded (attribute names excepted), so a module or toolbox anywhere
// in the object expression rejects the store.
void CellChecker::RecordStore(TSNode attribute, TSNode object, bool mutation) {
  TSNode root = object;
  while (grammar_.KindOf(root) == NodeKind::kAttribute) {
    root = ts_node_child_by_field_id(root, grammar_.object);
  }
  if (ts_node_is_null(root)) return;
  if (grammar_.KindOf(root) == NodeKind::kIdentifier) {
    stores_.push_back(PendingStore{std::string(Name(root)), attribute, mutation});
    return;
  }
  if (mutation) return;  // `f(x).update(...)`: not a module's table
  // Iterative walk of the object subtree (bounded by max_depth like Walk).
  TSTreeCursor cursor = ts_tree_cursor_new(root);
  uint32_t depth = 0;
  while (true) {
    TSNode node = ts_tree_cursor_current_node(&cursor);
    bool attribute_name = ts_tree_cursor_current_field_id(&cursor) == grammar_.attribute;
    if (grammar_.KindOf(node) == NodeKind::kIdentifier) {
      if (!attribute_name) stores_.push_back(PendingStore{std::string(Name(node)), attribute});
    } else if (ts_tree_cursor_goto_first_child(&cursor)) {
      ++depth;
      continue;
    }
    // Next: a sibling, else up; never beyond the object subtree.
    bool done = false;
    while (!done) {
      if (depth == 0) {
        done = true;
      } else if (ts_tree_cursor_goto_next_sibling(&cursor)) {
        break;
      } else {
        ts_tree_cursor_goto_parent(&cursor);
        --depth;
      }
    }
    if (done) break;
  }
  ts_tree_cursor_delete(&cursor);
}

void CellChecker::CheckPendingStores() {
  for (const PendingPath& path : paths_) {
    std::string module;
    if (auto it = imported_modules_.find(path.root); it != imported_modules_.end()) {
      module = it->second;
    } else if (policy_.allowed_modules.contains(path.root)) {
      module = path.root;
    }
    std::string dotted = module + "." + path.leaf;
    if (!module.empty() && !policy_.IsModuleAllowed(dotted)) {
      Report(Rule::kImportDenied, path.node, "module `" + dotted + "` is not in the allow-list");
    }
  }
  for (const PendingStore& store : stores_) {
    std::string_view root = store.root;
    if (store.mutation) {
      if (!policy_.toolbox_aliases.contains(root) &&
          (imported_names_.contains(root) || policy_.allowed_modules.contains(root))) {
        Report(Rule::kModuleAssignment, store.node,
               "changing a table that module `" + store.root + "` holds changes it for every "
               "session: copy it first (`t = dict(m.table)`)");
      }
      continue;
    }
    if (policy_.toolbox_aliases.contains(root)) {
      Report(Rule::kModuleAssignment, store.node,
             "assigning into toolbox `" + store.root + "`");
    } else if (imported_names_.contains(root) || policy_.allowed_modules.contains(root)) {
      Report(Rule::kModuleAssignment, store.node,
             "assigning into module `" + store.root + "`");
    }
  }
}

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
  methods_.push_back(std::move(method));
  frame.method_self = static_cast<std::int32_t>(methods_.size() - 1);
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
  class_nodes_.push_back(node);
  TSNode decorated = ts_node_parent(node);
  if (grammar_.KindOf(decorated) == NodeKind::kDecoratedDefinition) {
    for (uint32_t i = 0; i < ts_node_named_child_count(decorated); ++i) {
      TSNode child = ts_node_named_child(decorated, i);
      if (grammar_.KindOf(child) == NodeKind::kDecorator) class_decorators_[frame.class_slot].push_back(child);
    }
  }
  if (frame.scope == Scope::kModule && !name.empty()) {
    facts_.NoteBinding(name, start, frame.top_level ? CellFacts::Source::kClass
                                                    : CellFacts::Source::kOther,
                       frame.class_slot);
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
  std::string root = ChainRoot(value);
  if (!root.empty()) facts_.NoteAlias(std::string(Name(target)), std::move(root));
}

// `self._x` where self is a method's first parameter: decided at the end for
// instance-only methods, refused with the reason in any other method.
bool CellChecker::CheckSelfAttribute(TSNode attribute, const Frame& frame) {
  if (frame.self_slot < 0) return false;
  const Method& method = methods_[static_cast<std::size_t>(frame.self_slot)];
  TSNode object = ts_node_child_by_field_id(attribute, grammar_.object);
  TSNode name = ts_node_child_by_field_id(attribute, grammar_.attribute);
  if (grammar_.KindOf(object) != NodeKind::kIdentifier || ts_node_is_null(name)) return false;
  if (Name(object) != method.self) return false;
  std::string attr(Name(name));
  if (!attr.starts_with("_") || attr.starts_with("__")) return false;
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

// Counts every identifier under `node` (NFKC-folded) into `counts`.
void CellChecker::CountNames(TSNode node, std::map<std::string, int, std::less<>>& counts) {
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
const CellChecker::ClassBody& CellChecker::BodyOf(TSNode class_node) {
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
bool CellChecker::ClassBodyMentions(const Method& method, std::string_view name) {
  const ClassBody& body = BodyOf(method.class_node);
  auto count = [](const std::map<std::string, int, std::less<>>& counts, std::string_view key) {
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

// Whether Python can only call the method with an instance of its class as
// `self`: see MethodKind; `super` not rebound in it.
bool CellChecker::InstanceOnly(std::int32_t slot) {
  Method& method = methods_[static_cast<std::size_t>(slot)];
  if (method.instance_only >= 0) return method.instance_only == 1;
  // `nonlocal self` in a nested function rebinds it unseen by the method's walk.
  bool only = !method.binds_super && !declared_.contains(method.self);
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
      const Method& method = methods_[static_cast<std::size_t>(slot)];
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
    const Method& method = methods_[static_cast<std::size_t>(access.method)];
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
    for (TSNode decorator : class_decorators_[index]) {
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
      Report(Rule::kPrivateAttribute, class_nodes_[static_cast<std::size_t>(index)],
             "class `" + facts_.ClassName(index) + "` derives from a class an earlier cell sealed "
             "(its methods read `self._x`), so its other bases must be builtin classes, names "
             "imported in this cell from an allowed module, this cell's own classes or other "
             "sealed classes, with no keyword (metaclass=) (docs/gate.md, \"The gate's memory\")");
    }
  }
  if (learned_ != nullptr) {
    for (std::int32_t index : family) learned_->sealed_classes.insert(facts_.ClassName(index));
    for (const PendingAccess& access : accesses_) {
      const Method& method = methods_[static_cast<std::size_t>(access.method)];
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
  for (const Method& method : methods_) {
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

// The class and every class of the cell deriving from it are the cell's own:
// an instance of a subclass with a host base (`class D(A, Base)`, Base from
// an earlier cell) would carry the host's private state into A's methods,
// and a class method of A would get D as `cls`.
bool CellChecker::FamilyIsOwn(std::int32_t class_index) { return facts_.FamilyIsOwn(class_index); }

// The rules decided once the cell is seen: own classes, super() routes,
// caught exceptions and their aliases, bases rooted at a toolbox.
void CellChecker::CheckPendingFacts() {
  for (const PendingAccess& access : accesses_) {
    const Method& method = methods_[static_cast<std::size_t>(access.method)];
    TSNode name = ts_node_child_by_field_id(access.node, grammar_.attribute);
    std::string attr(Name(name));
    bool plain = method.kind == MethodKind::kRegular || method.kind == MethodKind::kClassMethod;
    if (!access.private_attribute && plain) {
      Report(Rule::kDunderAttribute, access.node,
             "`super()." + attr + "` in `" + method.name + "`: method dunders are read through "
             "super() only inside __dunder__ methods and properties, which Python calls on "
             "instances itself");
    } else if (!InstanceOnly(access.method)) {
      std::string used = method.kind == MethodKind::kGetter || method.kind == MethodKind::kSetter
                             ? std::string("property")
                             : method.name;
      Report(access.private_attribute ? Rule::kPrivateAttribute : Rule::kDunderAttribute,
             access.node,
             "`" + attr + "` in `" + method.name + "`: its class body also uses `" + used +
                 "`, or the method rebinds `" + method.self + "` or `super` (also through "
                 "`nonlocal`), so the method may get any object as `" + method.self + "`");
    } else if (access.private_attribute && !FamilyIsOwn(method.class_index)) {
      Report(Rule::kPrivateAttribute, access.node,
             "attribute `" + attr + "` is private, and the gate cannot see that the class owns "
             "it: `self._x` is allowed in a top-level class whose bases are builtins, classes "
             "imported in this cell or classes defined above it in this cell, and so are the "
             "bases of every class of the cell that derives from it (docs/gate.md)");
    }
  }
  CheckOwnMethods();
  NameSet caught = facts_.ResolveAliases(caught_);
  for (const PendingRoot& carrier : carriers_) {
    bool from_exception = carrier.root.empty() ? !caught.empty() : caught.contains(carrier.root);
    if (!from_exception) continue;
    std::string message = "`." + carrier.what + "` of a caught exception can hand back objects "
                          "of the code that raised it (a toolbox's internals): show it only "
                          "(`print(e." + carrier.what + ")`, `str(...)`, `repr(...)`, `len(...)`, "
                          "an f-string field), or use `str(e)`";
    Use use = carrier.root.empty() ? Use{} : ClassifyUse(carrier.node, grammar_, true);
    if (!ShownOnly(use, carrier.node, Rule::kAttributeDenied, message)) {
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

// Calls that make classes or change module tables.
void CellChecker::CheckCall(TSNode call, const Frame& frame) {
  TSNode function = ts_node_child_by_field_id(call, grammar_.function);
  TSNode arguments = ts_node_child_by_field_id(call, grammar_.arguments);
  NodeKind function_kind = grammar_.KindOf(function);
  std::string callee;
  if (function_kind == NodeKind::kIdentifier) {
    callee = Name(function);
    // `type(...)` and `ExceptionGroup(...)` are the uses of these names that
    // CheckIdentifier lets through (the arguments are checked here).
    if (callee == "type" || callee == "ExceptionGroup" || callee == "BaseExceptionGroup" ||
        callee == "deepcopy") {
      plain_callees_.insert(ts_node_start_byte(function));
    }
  } else if (function_kind == NodeKind::kAttribute) {
    TSNode attribute = ts_node_child_by_field_id(function, grammar_.attribute);
    if (!ts_node_is_null(attribute)) callee = Name(attribute);
    if (callee == "deepcopy") plain_callees_.insert(ts_node_start_byte(attribute));
    if (IsMutatingMethod(callee)) {
      RecordStore(function, ts_node_child_by_field_id(function, grammar_.object), true);
    }
  }
  uint32_t positional = 0;
  bool other = false;  // keywords, splats
  uint32_t count = ts_node_is_null(arguments) ? 0 : ts_node_named_child_count(arguments);
  for (uint32_t i = 0; i < count; ++i) {
    TSNode argument = ts_node_named_child(arguments, i);
    std::string_view kind = ts_node_type(argument);
    if (kind == "comment") continue;
    if (kind == "keyword_argument" || kind == "list_splat" || kind == "dictionary_splat") {
      other = true;
    } else {
      ++positional;
    }
  }
  bool type_call = callee == "type" && function_kind == NodeKind::kIdentifier;
  // `type(x)` is a class; called again it may be a metaclass (`type(int)` is `type`).
  bool type_result_call = false;
  if (function_kind == NodeKind::kCall) {
    TSNode inner = ts_node_child_by_field_id(function, grammar_.function);
    type_result_call = grammar_.KindOf(inner) == NodeKind::kIdentifier && Name(inner) == "type";
  }
  if (type_call && positional == 1 && !other && !frame.type_is_local && !frame.in_bases) {
    CheckTypeResultUse(call);
  }
  if (type_call && frame.in_bases) {
    Report(Rule::kConstructDenied, call,
           "a base class computed by `type()`: it may be a toolbox's class, an exception group "
           "or `type` itself; name the base class");
  }
  if (type_call && (positional != 1 || other)) {
    Report(Rule::kConstructDenied, call,
           "`type()` with more than one argument makes a class from a dict the gate cannot "
           "see (dunder keys): define the class with `class`");
  } else if (type_result_call && (positional > 2 || other)) {
    Report(Rule::kConstructDenied, call,
           "calling what `type(x)` returns with three arguments or a splat: when `x` is a "
           "class that is a metaclass, which makes a class from a dict the gate cannot see");
  } else if (callee == "deepcopy" && (positional > 1 || other)) {
    Report(Rule::kConstructDenied, call,
           "`deepcopy` with a memo: the memo substitutes objects inside the copy, which builds "
           "an instance of any class without its __init__; call `copy.deepcopy(x)`");
  } else if (!type_call && IsEnumClassName(callee) && (positional > 1 || other)) {
    Report(Rule::kConstructDenied, call,
           "the Enum functional API makes a class from names the gate cannot see: define "
           "the enum with `class " + callee + "`");
  }
}

// `type(x)` is a class, and `type(int)` is `type` itself, which makes classes
// from dicts: the result is used in place only (an attribute, a comparison,
// an f-string, a further call CheckCall bounds, or shown by print/str/repr/
// isinstance/issubclass), never bound or passed on.
void CellChecker::CheckTypeResultUse(TSNode call) {
  std::string message =
      "`type(x)` kept or passed on as a value: it may be `type` itself (`type(int)`), which "
      "makes classes from dicts; use it in place (`type(x).__name__`, `type(x) is int`, "
      "`print(type(x))`)";
  Use use = ClassifyUse(call, grammar_, false);
  switch (use.position) {
    case UsePosition::kAttributeObject:
    case UsePosition::kCallee:
    case UsePosition::kIdentity:
    case UsePosition::kInterpolation:
      return;
    case UsePosition::kEquality:
      // `==` may run the other operand's __eq__: a builtin class, an own class
      // (its metaclass is `type`) or another type(y) only.
      if (grammar_.KindOf(use.other) == NodeKind::kIdentifier) {
        builtin_uses_.push_back(BuiltinUse{std::string(Name(use.other)), call,
                                           Rule::kConstructDenied, message, true});
        return;
      }
      if (grammar_.KindOf(use.other) == NodeKind::kCall &&
          IsBuiltinCallee(ts_node_child_by_field_id(use.other, grammar_.function), {"type"})) {
        return;
      }
      break;
    case UsePosition::kArgument:
      if (IsBuiltinCallee(use.other, {"isinstance", "issubclass"}) && !use.in_tuple) {
        builtin_uses_.push_back(BuiltinUse{std::string(Name(use.other)), call,
                                           Rule::kConstructDenied, message});
        return;
      }
      if (ShownOnly(use, call, Rule::kConstructDenied, message)) return;
      break;
    default:
      if (TypeResultInBuiltins(call, message)) return;
      break;
  }
  Report(Rule::kConstructDenied, call, std::move(message));
}

// `type(x) in (int, float)`: a container literal of builtin names only (no
// __eq__ of the cell's runs).
bool CellChecker::TypeResultInBuiltins(TSNode call, const std::string& message) {
  TSNode comparison = ts_node_parent(call);
  if (std::string_view(ts_node_type(comparison)) != "comparison_operator" ||
      ts_node_child_count(comparison) != 3 || !ts_node_eq(ts_node_child(comparison, 0), call)) {
    return false;
  }
  std::string_view op = ts_node_type(ts_node_child(comparison, 1));
  TSNode container = ts_node_child(comparison, 2);
  std::string_view kind = ts_node_type(container);
  if ((op != "in" && op != "not in") || (kind != "tuple" && kind != "list" && kind != "set")) {
    return false;
  }
  std::vector<std::string> names;
  for (uint32_t i = 0; i < ts_node_named_child_count(container); ++i) {
    TSNode element = ts_node_named_child(container, i);
    if (grammar_.KindOf(element) != NodeKind::kIdentifier || !IsBuiltinName(Name(element))) return false;
    names.emplace_back(Name(element));
  }
  for (std::string& name : names) {
    builtin_uses_.push_back(BuiltinUse{std::move(name), call, Rule::kConstructDenied, message});
  }
  return true;
}

// A string in an annotation is code that typing evaluates later (typing's
// ForwardRef): only a dotted name, checked like one, is allowed.
void CellChecker::CheckStringAnnotation(TSNode string) {
  std::string decoded, problem;
  bool readable = true;
  if (grammar_.KindOf(string) == NodeKind::kString) {
    readable = AppendLiteral(string, decoded, problem);
  } else {
    uint32_t count = ts_node_named_child_count(string);
    for (uint32_t i = 0; i < count && readable; ++i) {
      readable = AppendLiteral(ts_node_named_child(string, i), decoded, problem);
    }
  }
  bool ok = readable && IsDottedIdentifierChain(decoded);
  if (ok) {
    std::size_t dot = decoded.find('.');
    std::string first = decoded.substr(0, dot);
    ok = !IsAlwaysDeniedName(first) && !policy_.denied_names.contains(first) &&
         !(IsDunder(first) && !policy_.allowed_dunders.contains(first));
    while (ok && dot != std::string::npos) {
      std::size_t next = decoded.find('.', dot + 1);
      ok = !AttributeVerdict(decoded.substr(dot + 1, next - dot - 1));
      dot = next;
    }
  }
  if (!ok) {
    Report(Rule::kConstructDenied, string,
           "a string annotation is code that typing evaluates later: write the annotation "
           "unquoted (`from __future__ import annotations` for forward references)");
  }
}

// Rejects the cell unless CPython's statements start where tree-sitter's do
// (a cell CPython cannot parse runs nothing, but the gate says so). An oracle
// without an interpreter at hand leaves the cell to the tree's own checks.
void CellChecker::CompareWithCpython(TSNode root) {
  StatusOr<std::vector<StatementStart>> cpython = policy_.statement_oracle(code_);
  if (!cpython.ok()) {
    if (cpython.status().code() == ErrorCode::kInvalidArgument) {
      Report(Rule::kSyntaxError, root, "CPython cannot parse the cell: " + cpython.status().message());
    }
    return;
  }
  std::vector<StatementStart> ours = StatementStarts(root);
  const std::vector<StatementStart>& theirs = *cpython;
  if (ours == theirs) return;
  auto [mine, cpythons] = std::mismatch(ours.begin(), ours.end(), theirs.begin(), theirs.end());
  StatementStart at = mine != ours.end() ? *mine : *cpythons;
  if (cpythons != theirs.end() && (mine == ours.end() || *cpythons < *mine)) at = *cpythons;
  uint32_t byte = 0;  // where line `at.line` starts
  for (uint32_t line = 1; line < at.line && byte < code_.size(); ++byte) {
    if (code_[byte] == '\n') ++line;
  }
  byte = std::min<uint32_t>(byte + at.column, static_cast<uint32_t>(code_.size()));
  Report(Rule::kSyntaxError, ts_node_descendant_for_byte_range(root, byte, byte),
         "tree-sitter and CPython read the statements differently here: "
         "the cell cannot be checked");
}

// Appends a plain string literal's decoded body; false (with `problem`) when
// it is an f-string or uses escapes the gate cannot decode.
bool CellChecker::AppendLiteral(TSNode string, std::string& decoded, std::string& problem) {
  std::string_view prefix;
  std::string body;
  uint32_t count = ts_node_child_count(string);
  for (uint32_t i = 0; i < count; ++i) {
    TSNode part = ts_node_child(string, i);
    NodeKind kind = grammar_.KindOf(part);
    if (kind == NodeKind::kStringStart) prefix = Text(part);
    if (kind == NodeKind::kInterpolation) {
      problem = "an f-string template";
      return false;
    }
    if (kind == NodeKind::kStringContent) body += Text(part);
  }
  bool raw = prefix.find_first_of("rR") != std::string_view::npos;
  if (prefix.find_first_of("fF") != std::string_view::npos) {
    problem = "an f-string template";
    return false;
  }
  std::string out;
  if (!DecodeLiteralBody(body, raw, out)) {
    problem = "a template with \\N{...} escapes";
    return false;
  }
  decoded += out;
  return true;
}

// str.format / format_map read attributes named inside the template; only a
// literal template the gate can read is accepted, and its fields are checked.
void CellChecker::CheckFormatReceiver(TSNode attribute, TSNode receiver) {
  NodeKind kind = grammar_.KindOf(receiver);
  std::string decoded;
  std::string problem = "a template that is not a string literal (use an f-string)";
  bool readable = false;
  if (kind == NodeKind::kString) {
    readable = AppendLiteral(receiver, decoded, problem);
  } else if (kind == NodeKind::kConcatenatedString) {
    readable = true;
    uint32_t count = ts_node_named_child_count(receiver);
    for (uint32_t i = 0; i < count && readable; ++i) {
      readable = AppendLiteral(ts_node_named_child(receiver, i), decoded, problem);
    }
  }
  if (!readable) {
    Report(Rule::kFormatString, attribute, "`.format` on " + problem);
    return;
  }
  for (const std::string& name : FormatFieldAttributes(decoded)) {
    if (auto verdict = AttributeVerdict(name)) {
      Report(verdict->first, receiver,
             "format field attribute `" + name + "` " + std::string(verdict->second));
    }
  }
}

}  // namespace

std::vector<Finding> CheckCell(std::string_view code, const Policy& policy) {
  return CellChecker(code, policy).Run(/*fast_path=*/true);
}

std::vector<Finding> CheckCellFullPath(std::string_view code, const Policy& policy) {
  return CellChecker(code, policy).Run(/*fast_path=*/false);
}

std::vector<Finding> CheckSessionCell(std::string_view code, const Policy& policy,
                                      const GateMemory& memory, GateMemory* learned) {
  return CellChecker(code, policy, &memory, learned).Run(/*fast_path=*/true);
}

std::vector<Finding> CheckSessionCellFullPath(std::string_view code, const Policy& policy,
                                              const GateMemory& memory, GateMemory* learned) {
  return CellChecker(code, policy, &memory, learned).Run(/*fast_path=*/false);
}

// A name the session's memory holds appears in the cell's bytes, not glued to
// another ASCII letter, digit or underscore (a superset of the identifiers
// spelled that way: the fast path takes ASCII identifiers only, and one ends
// where its bytes do).
bool CellChecker::MemoryMentioned() const {
  if (memory_ == nullptr) return false;
  auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  for (const GateMemory::Names* names : {&memory_->sealed_classes, &memory_->sealed_methods}) {
    for (const std::string& name : *names) {
      for (std::size_t at = code_.find(name); at != std::string_view::npos;
           at = code_.find(name, at + 1)) {
        const std::size_t end = at + name.size();
        if ((at == 0 || !word(code_[at - 1])) && (end == code_.size() || !word(code_[end]))) {
          return true;
        }
      }
    }
  }
  return false;
}

}  // namespace dolsot::sandbox
