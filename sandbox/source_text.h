// Checks on the raw bytes of a cell that must hold before it is parsed, so the
// gate reads the text exactly as CPython will (UTF-8, no NUL, no lone CR, ...),
// and helpers that turn byte offsets into 1-based line and column.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/utf8.h"
#include "sandbox/finding.h"
#include "sandbox/policy.h"

namespace dolsot::sandbox {

// The first reason `code` cannot be checked (kInvalidSource / kSourceLimit),
// or nullopt when it can be parsed.
std::optional<Finding> CheckSourceText(std::string_view code, const Policy& policy);

// 1-based code-point column of `byte`, given the byte column tree-sitter reports.
std::uint32_t CodePointColumn(std::string_view code, std::uint32_t byte,
                              std::uint32_t byte_column);

// A finding at `start_byte` located by scanning `code` (for pre-parse checks).
Finding FindingAt(std::string_view code, Rule rule, std::string message,
                  std::uint32_t start_byte, std::uint32_t end_byte);

}  // namespace dolsot::sandbox
