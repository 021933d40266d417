// Where a cell's code comes from (the positional argument or stdin) and the
// checks it passes before it reaches a backend.
#pragma once

#include <cstddef>
#include <istream>
#include <string>
#include <string_view>

#include "core/status.h"

namespace dolsot::cli {

// The largest cell the CLI accepts, in bytes (1 MiB).
inline constexpr std::size_t kMaxCodeBytes = std::size_t{1} << 20;

// Reads all of `in`, stopping with kInvalidArgument as soon as more than
// `limit` bytes arrived (the rest is not read).
StatusOr<std::string> ReadCode(std::istream& in, std::size_t limit = kMaxCodeBytes);

// OK when `code` is at most `limit` bytes of well-formed UTF-8 without NUL
// bytes; otherwise kInvalidArgument naming the problem and where it is
// ("line 3, column 7", 1-based, columns counted in bytes).
Status CheckCode(std::string_view code, std::size_t limit = kMaxCodeBytes);

}  // namespace dolsot::cli
