// Plain-text tables for a terminal: aligned columns, human sizes and ages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/session_info.h"

namespace dolsot::cli {

enum class Align { kLeft, kRight };

struct Column {
  std::string header;
  Align align = Align::kLeft;
};

// Columns separated by two spaces, each as wide as its widest cell, no
// trailing spaces; one line per row, header first. A row shorter than the
// header is padded with empty cells.
std::string FormatTable(const std::vector<Column>& columns,
                        const std::vector<std::vector<std::string>>& rows);

// "0 B", "512 B", "1.2 kB", "3.4 MB", "1.0 GB" (decimal units, one decimal).
std::string HumanSize(std::uint64_t bytes);

// How long ago `then` was, seen at `now` (both Unix seconds): "just now",
// "42 s ago", "3 min ago", "5 h ago", "1 day ago", "12 days ago". A time in
// the future (clock skew) reads "just now".
std::string HumanAge(double then, double now);

// The --list-sessions table: SESSION, SIZE, LAST USED.
std::string SessionsTable(const std::vector<SessionInfo>& sessions, double now);

}  // namespace dolsot::cli
