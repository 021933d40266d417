// Where tree-sitter's reading of a cell's lines could differ from CPython's:
// statements joined across a line end CPython ends, and the statement starts
// the gate compares with CPython's own parser when an interpreter is at hand.
#pragma once

#include <tree_sitter/api.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "sandbox/policy.h"

namespace dolsot::sandbox {

// The first place where tree-sitter reads one statement across a line end
// that CPython's tokenizer ends (no open bracket, no backslash): the byte
// offset of the first token after that line end. `a, b` then `[m.pi] = [1]`
// is one subscript store to tree-sitter and two statements to CPython;
// `match[x]:` then `case(1): m.pi = 1` is an annotation to tree-sitter.
// `root` must have no ERROR or MISSING node.
std::optional<std::uint32_t> FindJoinedLines(TSNode root);

// Every statement's start (elif too, and a decorated definition at its
// `def`/`class`), sorted: what CPython's ast gives as (lineno, col_offset).
std::vector<StatementStart> StatementStarts(TSNode root);

}  // namespace dolsot::sandbox
