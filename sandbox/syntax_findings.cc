// Where the tree is not what CPython reads (see syntax_findings.h).
#include "sandbox/syntax_findings.h"

#include <algorithm>
#include <cstdint>

#include "sandbox/line_structure.h"
#include "sandbox/tree_sitter_handles.h"

namespace dolsot::sandbox {

std::vector<SyntaxProblem> ParseErrors(TSNode root, std::string_view code, std::size_t limit) {
  std::vector<SyntaxProblem> problems;
  TreeCursor cursor(root);
  bool descend = true;
  while (problems.size() < limit) {
    TSNode node = ts_tree_cursor_current_node(cursor.get());
    descend = ts_node_has_error(node);
    if (ts_node_is_missing(node)) {
      problems.push_back(
          {node, "missing `" + std::string(ts_node_type(node)) + "`: the cell does not parse"});
      descend = false;
    } else if (ts_node_is_error(node)) {
      uint32_t start = ts_node_start_byte(node), end = ts_node_end_byte(node);
      std::string_view text = code.substr(start, end - start).substr(0, 40);
      std::string shown(text.substr(0, text.find('\n')));
      problems.push_back({node, "cannot parse `" + shown + "`: the cell does not parse"});
      descend = false;
    }
    if (descend && ts_tree_cursor_goto_first_child(cursor.get())) continue;
    while (!ts_tree_cursor_goto_next_sibling(cursor.get())) {
      if (!ts_tree_cursor_goto_parent(cursor.get())) {
        if (problems.empty()) problems.push_back({root, "the cell does not parse"});
        return problems;
      }
    }
  }
  return problems;
}

std::optional<SyntaxProblem> JoinedLine(TSNode root) {
  std::optional<uint32_t> joined = FindJoinedLines(root);
  if (!joined) return std::nullopt;
  return SyntaxProblem{
      ts_node_descendant_for_byte_range(root, *joined, *joined),
      "tree-sitter reads this line as part of the line before, CPython does not: "
      "the cell cannot be checked (end the statement before, or wrap it in brackets)"};
}

std::optional<SyntaxProblem> CpythonDisagreement(TSNode root, std::string_view code,
                                                 const StatementOracle& oracle) {
  StatusOr<std::vector<StatementStart>> cpython = oracle(code);
  if (!cpython.ok()) {
    if (cpython.status().code() == ErrorCode::kInvalidArgument) {
      return SyntaxProblem{root, "CPython cannot parse the cell: " + cpython.status().message()};
    }
    return std::nullopt;
  }
  std::vector<StatementStart> ours = StatementStarts(root);
  const std::vector<StatementStart>& theirs = *cpython;
  if (ours == theirs) return std::nullopt;
  auto [mine, cpythons] = std::mismatch(ours.begin(), ours.end(), theirs.begin(), theirs.end());
  StatementStart at = mine != ours.end() ? *mine : *cpythons;
  if (cpythons != theirs.end() && (mine == ours.end() || *cpythons < *mine)) at = *cpythons;
  uint32_t byte = 0;  // where line `at.line` starts
  for (uint32_t line = 1; line < at.line && byte < code.size(); ++byte) {
    if (code[byte] == '\n') ++line;
  }
  byte = std::min<uint32_t>(byte + at.column, static_cast<uint32_t>(code.size()));
  return SyntaxProblem{ts_node_descendant_for_byte_range(root, byte, byte),
                       "tree-sitter and CPython read the statements differently here: "
                       "the cell cannot be checked"};
}

}  // namespace dolsot::sandbox
