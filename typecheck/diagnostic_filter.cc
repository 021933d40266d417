// Which of ty's diagnostics reject a cell, and where in the cell they are
// (see diagnostic_filter.h).
#include "typecheck/diagnostic_filter.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/python_chars.h"
#include "typecheck/file_uri.h"

namespace dolsot::typecheck {
namespace {

using nlohmann::json;

// ty's rules about the arguments of a call.
constexpr std::string_view kCallRules[] = {
    "invalid-argument-type",      "missing-argument",     "too-many-positional-arguments",
    "unknown-argument",           "parameter-already-assigned", "no-matching-overload",
    "positional-only-parameter-as-kwarg"};

bool IsCallRule(std::string_view rule) {
  return std::find(std::begin(kCallRules), std::end(kCallRules), rule) != std::end(kCallRules);
}

// One report item, read defensively (absent or mistyped fields stay empty).
struct Item {
  std::string rule;
  std::string message;  // its first line
  int line = 0;         // 1-based, in the checked file
  int column = 0;       // 1-based
  std::string related_file;  // the first related location's path, or ""
};

std::string StringAt(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// object[key] as a non-negative int, or -1.
int IndexAt(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return -1;
  long long value = it->get<long long>();
  return value >= 0 && value < (1 << 30) ? static_cast<int>(value) : -1;
}

std::optional<Item> ReadItem(const json& item) {
  if (!item.is_object()) return std::nullopt;
  Item out;
  out.rule = StringAt(item, "code");
  out.message = StringAt(item, "message");
  out.message = out.message.substr(0, out.message.find('\n'));
  auto range = item.find("range");
  if (range == item.end() || !range->is_object()) return std::nullopt;
  auto start = range->find("start");
  if (start == range->end() || !start->is_object()) return std::nullopt;
  int line = IndexAt(*start, "line");
  int character = IndexAt(*start, "character");
  if (line < 0 || character < 0) return std::nullopt;
  out.line = line + 1;
  out.column = character + 1;
  auto related = item.find("relatedInformation");
  if (related != item.end() && related->is_array() && !related->empty()) {
    const json& first = related->front();
    auto location = first.is_object() ? first.find("location") : first.end();
    if (location != first.end() && location->is_object()) {
      out.related_file = PathOfUri(StringAt(*location, "uri"));
    }
  }
  return out;
}

// True when `file` is (inside) the source of module `module`.
bool FileBelongsTo(std::string_view file, const std::string& module) {
  std::string rel = "/" + module;
  std::replace(rel.begin(), rel.end(), '.', '/');
  return file.find(rel + "/") != std::string_view::npos || file.ends_with(rel + ".py") ||
         file.ends_with(rel + ".pyi");
}

// The text inside the first `backticks` after `marker` in `message`.
std::string_view BacktickedAfter(std::string_view message, std::string_view marker) {
  std::size_t at = message.find(marker);
  if (at == std::string_view::npos) return {};
  std::size_t open = at + marker.size();
  std::size_t close = message.find('`', open);
  return close == std::string_view::npos ? std::string_view() : message.substr(open, close - open);
}

// Line `line` (1-based) of `code`, or "".
std::string_view LineOf(std::string_view code, int line) {
  for (int i = 1; i < line; ++i) {
    std::size_t newline = code.find('\n');
    if (newline == std::string_view::npos) return {};
    code.remove_prefix(newline + 1);
  }
  return code.substr(0, code.find('\n'));
}

// True when `line` holds `alias.callee` (as whole names) for a toolbox alias.
bool LineCallsThroughAlias(std::string_view line, std::string_view callee,
                           const TypeCheckRequest& request) {
  if (callee.empty()) return false;
  for (const auto& entry : request.toolboxes) {
    std::string needle = entry.first + "." + std::string(callee);
    for (std::size_t at = line.find(needle); at != std::string_view::npos;
         at = line.find(needle, at + 1)) {
      std::size_t end = at + needle.size();
      bool left_ok = at == 0 || (!IsAsciiNameChar(line[at - 1]) && line[at - 1] != '.');
      bool right_ok = end >= line.size() || !IsAsciiNameChar(line[end]);
      if (left_ok && right_ok) return true;
    }
  }
  return false;
}

bool MattersForToolbox(const Item& item, const TypeCheckRequest& request, int cell_line,
                       std::string_view cell_path) {
  if (item.rule == "missing-attribute") {
    std::string_view module = BacktickedAfter(item.message, "Module `");
    return std::any_of(request.toolboxes.begin(), request.toolboxes.end(),
                       [&](const auto& entry) { return entry.second == module; });
  }
  if (!IsCallRule(item.rule)) return false;
  if (!item.related_file.empty()) {
    if (item.related_file == cell_path) return false;  // the cell's own function
    return std::any_of(request.toolboxes.begin(), request.toolboxes.end(), [&](const auto& entry) {
      return FileBelongsTo(item.related_file, entry.second);
    });
  }
  std::string_view callee = BacktickedAfter(item.message, "function `");
  return LineCallsThroughAlias(LineOf(request.code, cell_line), callee, request);
}

}  // namespace

std::vector<TypeDiagnostic> ToolboxDiagnostics(const json& items, const TypeCheckRequest& request,
                                               const CellSource& source,
                                               std::string_view cell_path) {
  std::vector<TypeDiagnostic> out;
  if (!items.is_array()) return out;
  for (const json& raw : items) {
    std::optional<Item> item = ReadItem(raw);
    if (!item) continue;
    int cell_line = item->line - source.prelude_lines;
    if (cell_line <= 0 || !MattersForToolbox(*item, request, cell_line, cell_path)) continue;
    out.push_back({item->rule, item->message, cell_line, item->column});
  }
  return out;
}

}  // namespace dolsot::typecheck
