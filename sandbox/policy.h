// sandbox::Policy: what a host lets cells import and use, on top of the fixed
// rules of rules.h. A plain value: build it in C++ or from Python.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dolsot::sandbox {

using NameSet = std::set<std::string, std::less<>>;

// Where a statement starts: 1-based line, 0-based column in UTF-8 bytes
// (what CPython's ast gives as lineno and col_offset).
struct StatementStart {
  std::uint32_t line = 0;
  std::uint32_t column = 0;
  auto operator<=>(const StatementStart&) const = default;
};

// CPython's own reading of a cell: every statement's start, sorted (nested
// ones too). InvalidArgument when CPython cannot parse the cell; any other
// error when no interpreter is at hand. embedded/cpython_statements.h has one.
using StatementOracle = std::function<StatusOr<std::vector<StatementStart>>(std::string_view code)>;

struct Policy {
  // Modules a cell may import: `import a.b` is allowed when `a.b` or `a` is here.
  NameSet allowed_modules;
  // Names the session binds to toolboxes (inject aliases). Always importable,
  // never rebound, never assigned into.
  NameSet toolbox_aliases;
  // The modules those aliases are bound to (AllowToolbox fills both): their
  // classes are the host's, never a base the gate can vouch for.
  NameSet toolbox_modules;
  // Extra names denied as names and as attributes (the fixed list in rules.cc
  // always applies).
  NameSet denied_names;
  // __dunder__ names a cell may define and use (a class's own __init__, ...).
  NameSet allowed_dunders;
  // `self._x` in plain methods (no decorator) of the cell's own classes,
  // sealed within the cell and, through the session's gate memory, in every
  // later cell (docs/gate.md, "The cell's own classes", "The gate's memory").
  // A session gate without a complete memory (a restored pre-memory
  // checkpoint) refuses them whatever this says.
  bool private_in_plain_methods = true;
  // Larger cells are rejected (source-limit) before parsing.
  std::size_t max_source_bytes = 8u << 20;
  // Deeper syntax trees are rejected (source-limit); CPython's own parser
  // gives up far earlier.
  std::size_t max_depth = 5000;
  // At most this many findings are reported (one more line says how many were left).
  std::size_t max_findings = 50;
  // Optional: CPython's statement starts. When set, a cell the full path
  // parses is rejected (syntax-error) unless tree-sitter's statement starts
  // are exactly CPython's, or CPython cannot parse it either. Unset (or an
  // oracle that answers neither) leaves only the tree's own checks.
  StatementOracle statement_oracle;

  // Lets `alias` (bound to module `module`) be used as a toolbox.
  void AllowToolbox(std::string alias, std::string module);
  bool IsModuleAllowed(std::string_view dotted_module) const;
};

// The default: DefaultAllowedModules() and DefaultAllowedDunders() of rules.h,
// no toolboxes, no extra denied names.
Policy DefaultPolicy();

}  // namespace dolsot::sandbox
