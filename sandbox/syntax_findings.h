// Where the tree is not what CPython reads, the findings of rule kSyntaxError:
// tree-sitter's ERROR and MISSING nodes, a line it joins to the line before,
// and statements CPython's own parser starts elsewhere (the statement oracle).
#pragma once

#include <tree_sitter/api.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/policy.h"

namespace dolsot::sandbox {

struct SyntaxProblem {
  TSNode node;  // where to report it
  std::string message;
};

// The first `limit` ERROR and MISSING nodes of a tree that has errors, in
// source order; the root alone when the walk meets none of them.
std::vector<SyntaxProblem> ParseErrors(TSNode root, std::string_view code, std::size_t limit);

// A line tree-sitter reads as part of the line before and CPython does not
// (line_structure.h), in a tree without errors.
std::optional<SyntaxProblem> JoinedLine(TSNode root);

// Where CPython's statements (asked of `oracle`) start elsewhere than the
// tree's, or that CPython cannot parse the cell. An oracle without an
// interpreter at hand answers nothing: the cell is left to the tree's checks.
std::optional<SyntaxProblem> CpythonDisagreement(TSNode root, std::string_view code,
                                                 const StatementOracle& oracle);

}  // namespace dolsot::sandbox
