// The gate's imports (see cell_checker.h): what a cell may import and bind, and
// stores into what a module or a toolbox holds.
#include "sandbox/cell_checker.h"

#include "sandbox/rules.h"

namespace dolsot::sandbox {

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
      if (!CheckIoImport(target, alias, from_path, path)) continue;
      bound = path;
    } else {
      std::string path = DottedPath(target, true);
      if (!policy_.IsModuleAllowed(path)) {
        Report(Rule::kImportDenied, target, "module `" + path + "` is not in the allow-list");
        continue;
      }
      if (!CheckIoImport(target, alias, "", path)) continue;
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

// io keeps its names (`import io`, `from io import StringIO`: the gate holds
// the names `io`, `StringIO` and `BytesIO` to their safe uses in every cell,
// which an alias would escape), and only its allowed names are imported.
bool CellChecker::CheckIoImport(TSNode target, TSNode alias, std::string_view from_path,
                                std::string_view name) {
  if (from_path.empty()) {  // `import io [as x]`
    if ((name != "io" && !name.starts_with("io.")) || ts_node_is_null(alias)) return true;
    Report(Rule::kImportDenied, alias,
           "`import io as ...`: import io under its own name (the gate allows the name `io` "
           "only as `io.StringIO(...)`, `io.BytesIO(...)` and io's constants, in every cell)");
    return false;
  }
  if (from_path != "io") return true;
  if (!IsAllowedIoAttribute(name)) {
    Report(Rule::kAttributeDenied, target,
           "`io." + std::string(name) + "`: of io only StringIO, BytesIO, the SEEK_* constants, "
           "DEFAULT_BUFFER_SIZE, text_encoding and its exceptions are allowed (the rest opens "
           "files or calls a wrapped object's close() when collected)");
    return false;
  }
  if (!ts_node_is_null(alias) && IsIoClassName(name)) {
    Report(Rule::kImportDenied, alias,
           "`from io import " + std::string(name) + " as ...`: import it under its own name "
           "(the gate allows `" + std::string(name) + "` only called or tested, in every cell)");
    return false;
  }
  return true;
}

// The name `io` read: only as `io.<allowed>` (also in a pattern's dotted name).
void CellChecker::CheckIoModuleUse(TSNode node) {
  Use use = ClassifyUse(node, grammar_, false);
  TSNode attribute = use.position == UsePosition::kAttributeObject ? use.other : TSNode{};
  TSNode parent = ts_node_parent(node);
  if (grammar_.KindOf(parent) == NodeKind::kDottedName && ts_node_named_child_count(parent) >= 2 &&
      ts_node_eq(ts_node_named_child(parent, 0), node)) {
    attribute = ts_node_named_child(parent, 1);
  }
  if (!ts_node_is_null(attribute) && IsAllowedIoAttribute(Name(attribute))) return;
  Report(Rule::kAttributeDenied, node,
         "the module `io` is allowed only as `io.StringIO(...)`, `io.BytesIO(...)`, its SEEK_* "
         "constants, DEFAULT_BUFFER_SIZE, text_encoding and its exceptions: its other names "
         "open files (`io.open`, `io.FileIO`) or call a wrapped object's close() when collected, "
         "and as a value it would carry them on");
}

// `StringIO` / `BytesIO` (a name, or `x.StringIO`: csv holds io.StringIO too):
// called or the class of isinstance/issubclass only. A subclass's close()
// would run when an instance is collected (IOBase's finalizer), on whatever
// thread collects it.
void CellChecker::CheckIoClassUse(TSNode expression) {
  Use use = ClassifyUse(expression, grammar_, false);
  if (use.position == UsePosition::kCallee) return;
  std::string message =
      "`" + std::string(Text(expression)) + "` as a value: io's classes may only be called "
      "(`io.StringIO(text)`) or tested (`isinstance(f, io.StringIO)`): a subclass's close() "
      "would run when an instance is collected, later and on whatever thread collects it";
  if (use.position == UsePosition::kArgument && use.index == 1 && use.count == 2 &&
      IsBuiltinCallee(use.other, {"isinstance", "issubclass"})) {
    builtin_uses_.push_back(BuiltinUse{std::string(Name(use.other)), expression,
                                       Rule::kAttributeDenied, std::move(message)});
    return;
  }
  Report(Rule::kAttributeDenied, expression, std::move(message));
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

}  // namespace dolsot::sandbox
