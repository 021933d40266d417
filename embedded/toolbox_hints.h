// Toolbox hints: when a call into a toolbox function fails with a TypeError
// about its arguments, the error shows the function's signature and, where
// the toolbox has a help() callable, points at alias.help("fn_name").
//
// Needs the GIL.
#pragma once

#include <vector>
#include <optional>
#include <string>

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

// Given the exception a cell raised (`exc`, a live exception object, its
// __traceback__ set) and the session namespace `globals` in which toolbox
// modules are bound under their aliases (`aliases`), returns an extra line to
// append to the error, or nullopt when the exception is not such a call error.
std::optional<std::string> ToolboxCallHint(PyObject* exc, PyObject* globals,
                                           const std::vector<std::string>& aliases);

// The int `.exit_code` an exception carries (a toolbox's own failure class),
// or nullopt when it has none (bools are not exit codes).
std::optional<int> ExceptionExitCode(PyObject* exc);

}  // namespace dolsot
