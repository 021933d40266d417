// The prelude and cell text ty checks (see cell_source.h).
#include "typecheck/cell_source.h"

#include <algorithm>
#include <iterator>
#include <string_view>

#include "core/python_chars.h"

namespace dolsot::typecheck {
namespace {

constexpr const char* kAnyAlias = "_dolsot_Any_";

bool IsKeyword(std::string_view name) {
  static constexpr std::string_view kKeywords[] = {
      "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
      "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
      "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise",
      "return", "try", "while", "with", "yield"};
  return std::find(std::begin(kKeywords), std::end(kKeywords), name) != std::end(kKeywords);
}

// A Python identifier (non-ASCII letters taken as they are), not a keyword.
bool IsIdentifier(std::string_view name) {
  if (name.empty() || IsAsciiDigit(name[0]) || IsKeyword(name)) return false;
  return std::all_of(name.begin(), name.end(), IsNameByte);
}

bool IsDottedName(std::string_view name) {
  while (true) {
    std::size_t dot = name.find('.');
    if (!IsIdentifier(name.substr(0, dot))) return false;
    if (dot == std::string_view::npos) return true;
    name.remove_prefix(dot + 1);
  }
}

}  // namespace

CellSource BuildCellSource(const TypeCheckRequest& request) {
  CellSource out;
  auto add = [&out](const std::string& line) {
    out.text += line + '\n';
    ++out.prelude_lines;
  };
  for (const auto& [alias, module] : request.toolboxes) {
    if (IsIdentifier(alias) && IsDottedName(module)) add("import " + module + " as " + alias);
  }
  add(std::string("from typing import Any as ") + kAnyAlias);
  for (const std::string& name : request.session_names) {
    if (IsIdentifier(name) && request.toolboxes.count(name) == 0 && name != kAnyAlias) {
      add(name + ": " + kAnyAlias + " = ...");
    }
  }
  out.text += request.code;
  if (out.text.back() != '\n') out.text += '\n';
  return out;
}

}  // namespace dolsot::typecheck
