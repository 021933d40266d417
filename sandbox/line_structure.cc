// Line structure checks that keep tree-sitter's reading of a cell honest
// against CPython's (see line_structure.h and docs/gate.md, "Seeing the cell
// as CPython does").
#include "sandbox/line_structure.h"

#include <algorithm>
#include <cstring>

#include "sandbox/tree_sitter_handles.h"

namespace dolsot::sandbox {
namespace {

// Nodes that are statements to CPython (elif is an If of its own).
constexpr std::string_view kStatementKinds[] = {
    "assert_statement", "break_statement", "class_definition", "continue_statement",
    "delete_statement", "elif_clause", "exec_statement", "expression_statement",
    "for_statement", "function_definition", "future_import_statement", "global_statement",
    "if_statement", "import_from_statement", "import_statement", "match_statement",
    "nonlocal_statement", "pass_statement", "print_statement", "raise_statement",
    "return_statement", "try_statement", "type_alias_statement", "while_statement",
    "with_statement",
};

// Nodes that may start a logical line besides statements: clauses of compound
// statements, decorators, blocks.
constexpr std::string_view kLineStartKinds[] = {
    "block", "case_clause", "decorated_definition", "decorator", "else_clause",
    "except_clause", "except_group_clause", "finally_clause", "module",
};

bool IsStatementKind(std::string_view type) {
  return std::find(std::begin(kStatementKinds), std::end(kStatementKinds), type) !=
         std::end(kStatementKinds);
}

bool MayStartLine(TSNode node) {
  std::string_view type = ts_node_type(node);
  return IsStatementKind(type) || std::find(std::begin(kLineStartKinds),
                                            std::end(kLineStartKinds),
                                            type) != std::end(kLineStartKinds);
}

// Whether some node starting exactly where `unit` starts may start a line.
bool StartsLogicalLine(TSNode unit) {
  uint32_t start = ts_node_start_byte(unit);
  for (TSNode node = unit; !ts_node_is_null(node) && ts_node_start_byte(node) == start;
       node = ts_node_parent(node)) {
    if (MayStartLine(node)) return true;
  }
  return false;
}

}  // namespace

std::optional<std::uint32_t> FindJoinedLines(TSNode root) {
  TreeCursor cursor(root);
  TSTreeCursor* c = cursor.get();
  int depth = 0;               // open brackets outside strings
  bool have_previous = false;
  // The last row of the logical line so far: the last unit's end row, moved
  // on by a backslash at its end (a backslash on a later row comes after
  // CPython ended the line).
  uint32_t line_end_row = 0;
  while (true) {
    TSNode node = ts_tree_cursor_current_node(c);
    std::string_view type = ts_node_type(node);
    bool descend = false;
    if (type == "line_continuation") {
      if (ts_node_start_point(node).row == line_end_row) ++line_end_row;
    } else if (type == "comment") {
      // extras: no token of CPython's logical line
    } else if (type == "string" || ts_node_child_count(node) == 0) {
      // A unit: one token to CPython (a string with its f-string fields).
      TSPoint start = ts_node_start_point(node);
      if (have_previous && start.row > line_end_row && depth == 0 && !StartsLogicalLine(node)) {
        return ts_node_start_byte(node);
      }
      if (type == "(" || type == "[" || type == "{") ++depth;
      if ((type == ")" || type == "]" || type == "}") && depth > 0) --depth;
      line_end_row = ts_node_end_point(node).row;
      have_previous = true;
    } else {
      descend = true;
    }
    if (descend && ts_tree_cursor_goto_first_child(c)) continue;
    while (!ts_tree_cursor_goto_next_sibling(c)) {
      if (!ts_tree_cursor_goto_parent(c)) return std::nullopt;
    }
  }
}

std::vector<StatementStart> StatementStarts(TSNode root) {
  std::vector<StatementStart> starts;
  TreeCursor cursor(root);
  TSTreeCursor* c = cursor.get();
  while (true) {
    TSNode node = ts_tree_cursor_current_node(c);
    bool descend = ts_node_is_named(node) && ts_node_child_count(node) > 0;
    if (descend && IsStatementKind(ts_node_type(node))) {
      TSPoint point = ts_node_start_point(node);
      starts.push_back(StatementStart{point.row + 1, point.column});
    }
    if (descend && ts_tree_cursor_goto_first_child(c)) continue;
    while (!ts_tree_cursor_goto_next_sibling(c)) {
      if (!ts_tree_cursor_goto_parent(c)) {
        std::sort(starts.begin(), starts.end());
        return starts;
      }
    }
  }
}

}  // namespace dolsot::sandbox
