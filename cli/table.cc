// Aligned text tables, human sizes and ages.
#include "cli/table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dolsot::cli {
namespace {

std::string Pad(const std::string& cell, std::size_t width, Align align) {
  if (cell.size() >= width) return cell;
  const std::string fill(width - cell.size(), ' ');
  return align == Align::kLeft ? cell + fill : fill + cell;
}

std::string Plural(long long count, const char* unit, const char* units) {
  return std::to_string(count) + " " + (count == 1 ? unit : units) + " ago";
}

}  // namespace

std::string FormatTable(const std::vector<Column>& columns,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& column : columns) widths.push_back(column.header.size());
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  const auto append_line = [&](const auto& cell_at) {
    std::string line;
    for (std::size_t i = 0; i < columns.size(); ++i) {
      if (i) line += "  ";
      line += Pad(cell_at(i), widths[i], columns[i].align);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  append_line([&](std::size_t i) { return columns[i].header; });
  for (const auto& row : rows) {
    append_line([&](std::size_t i) { return i < row.size() ? row[i] : std::string(); });
  }
  return out;
}

std::string HumanSize(std::uint64_t bytes) {
  if (bytes < 1000) return std::to_string(bytes) + " B";
  static constexpr const char* kUnits[] = {"kB", "MB", "GB", "TB", "PB", "EB"};
  double scaled = static_cast<double>(bytes) / 1000.0;
  std::size_t unit = 0;
  // Move up a unit when the value would print as 1000.0 or more.
  while (scaled >= 999.95 && unit + 1 < std::size(kUnits)) {
    scaled /= 1000.0;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f %s", scaled, kUnits[unit]);
  return buffer;
}

std::string HumanAge(double then, double now) {
  const double seconds = now - then;
  if (!std::isfinite(seconds) || seconds < 1.0) return "just now";
  const auto whole = static_cast<long long>(seconds);
  if (whole < 60) return std::to_string(whole) + " s ago";
  if (whole < 3600) return std::to_string(whole / 60) + " min ago";
  if (whole < 86400) return std::to_string(whole / 3600) + " h ago";
  return Plural(whole / 86400, "day", "days");
}

std::string SessionsTable(const std::vector<SessionInfo>& sessions, double now) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(sessions.size());
  for (const auto& session : sessions) {
    rows.push_back({session.id, HumanSize(session.size_bytes), HumanAge(session.last_used, now)});
  }
  return FormatTable({{"SESSION", Align::kLeft}, {"SIZE", Align::kRight}, {"LAST USED", Align::kLeft}},
                     rows);
}

}  // namespace dolsot::cli
