// ResultField: every field of Result once, with the name Python and --json
// give it, and which fields each face carries, in its order: the worker
// protocol's RESULT (backend_subprocess/protocol.cc), the CLI's --json
// (cli/json_writer.cc) and the Python class (bindings/bind_core.cc; its stub,
// bindings/dolsot/_dolsot.pyi, is held to it by tests/python/test_core.py).
//
// A new Result field: its member in result.h, its enumerator and name here,
// then the static_asserts below refuse to compile until every face lists it
// (carried, or left out on purpose), and each face's switch over the field
// (built with -Werror=switch) refuses until it has a case for it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dolsot {

enum class ResultField : std::uint8_t {
  kOk,
  kValue,
  kStdout,     // Result::stdout_text
  kError,
  kExitCode,
  kOutcome,    // Result::outcome(), set once
  kErrorType,
  kHeld,
  kDropped,
  kSaveError,
  kReturned,   // what the final-answer function was given
  kImages,
  kMaxText,
  kText,       // Result::Text(), made from the rest
};
inline constexpr std::size_t kResultFieldCount = 14;

// The name Python's attribute and --json's key give each field.
inline constexpr std::array<std::string_view, kResultFieldCount> kResultFieldNames = {
    "ok",   "value",    "stdout",     "error",    "exit_code", "outcome", "error_type",
    "held", "dropped",  "save_error", "returned", "images",    "max_text", "text",
};

constexpr std::string_view ResultFieldName(ResultField field) {
  return kResultFieldNames[static_cast<std::size_t>(field)];
}

// RESULT's payload, in its order (the protocol tests hold it byte for byte).
inline constexpr ResultField kResultWireFields[] = {
    ResultField::kOk,      ResultField::kValue,     ResultField::kStdout,
    ResultField::kError,   ResultField::kExitCode,  ResultField::kHeld,
    ResultField::kDropped, ResultField::kErrorType, ResultField::kReturned,
    ResultField::kImages,
};
// Not sent: the host classifies the outcome, saves the state, holds the cap
// and makes the text.
inline constexpr std::array kResultNotOnWire = {
    ResultField::kOutcome, ResultField::kSaveError, ResultField::kMaxText, ResultField::kText,
};

// --json's keys, in the documented order (docs/cli.md; the CLI tests hold it).
inline constexpr ResultField kResultJsonFields[] = {
    ResultField::kOk,        ResultField::kValue,   ResultField::kStdout,
    ResultField::kError,     ResultField::kExitCode, ResultField::kOutcome,
    ResultField::kErrorType, ResultField::kHeld,    ResultField::kDropped,
    ResultField::kSaveError, ResultField::kText,    ResultField::kImages,
};
// Not written: a final answer is a pickle for a Python host; the cap is the
// CLI's own setting.
inline constexpr std::array kResultNotInJson = {ResultField::kReturned, ResultField::kMaxText};

// Python's Result: its read-only attributes, in the order they are defined
// (every field; `returned` brings `has_returned` beside it).
inline constexpr ResultField kResultPythonFields[] = {
    ResultField::kOk,       ResultField::kValue,     ResultField::kStdout,
    ResultField::kError,    ResultField::kExitCode,  ResultField::kOutcome,
    ResultField::kHeld,     ResultField::kDropped,   ResultField::kErrorType,
    ResultField::kReturned, ResultField::kSaveError, ResultField::kImages,
    ResultField::kMaxText,  ResultField::kText,
};
// Result(...)'s keyword arguments, in order.
inline constexpr ResultField kResultPythonInitFields[] = {
    ResultField::kOk,        ResultField::kValue,     ResultField::kStdout,
    ResultField::kError,     ResultField::kExitCode,  ResultField::kHeld,
    ResultField::kDropped,   ResultField::kOutcome,   ResultField::kErrorType,
    ResultField::kSaveError, ResultField::kImages,    ResultField::kMaxText,
};
// Not a keyword: a final answer comes only from a cell; the text is made.
inline constexpr std::array kResultNotInPythonInit = {ResultField::kReturned, ResultField::kText};

// True when `carried` and `left_out` together name every field exactly once.
template <std::size_t N, std::size_t M = 0>
constexpr bool NamesEachResultFieldOnce(const ResultField (&carried)[N],
                                        const std::array<ResultField, M>& left_out = {}) {
  std::array<int, kResultFieldCount> seen{};
  for (ResultField field : carried) ++seen[static_cast<std::size_t>(field)];
  for (ResultField field : left_out) ++seen[static_cast<std::size_t>(field)];
  for (int count : seen) {
    if (count != 1) return false;
  }
  return true;
}

static_assert(static_cast<std::size_t>(ResultField::kText) + 1 == kResultFieldCount,
              "kResultFieldCount: one more than the last ResultField");
static_assert(NamesEachResultFieldOnce(kResultWireFields, kResultNotOnWire),
              "RESULT's payload: every ResultField carried or left out, once");
static_assert(NamesEachResultFieldOnce(kResultJsonFields, kResultNotInJson),
              "--json: every ResultField written or left out, once");
static_assert(NamesEachResultFieldOnce(kResultPythonFields),
              "Python's Result: every ResultField an attribute, once");
static_assert(NamesEachResultFieldOnce(kResultPythonInitFields, kResultNotInPythonInit),
              "Result(...): every ResultField a keyword or left out, once");

}  // namespace dolsot
