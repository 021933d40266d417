// How the gate configures ty without writing a file: the `initialize`
// request's parameters (the interpreter and search paths travel in LSP
// initializationOptions) and the key that tells when a running server no
// longer fits a request.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "typecheck/type_check.h"

namespace dolsot::typecheck {

// The request's python_path as ty should search it, in order, once each:
// absolute and normalized ("" is the current directory, as in sys.path),
// without entries that are not directories (zips, missing dirs: ty rejects
// them) and without the interpreter's own standard-library directories
// (their typing.py would shadow typeshed's stubs: `Any` would stop being Any).
std::vector<std::string> SearchDirs(const TypeCheckRequest& request);

// The params of `initialize` for a server whose workspace is `workspace`,
// started by process `host_pid`:
//   processId, rootUri and workspaceFolders (the workspace), capabilities
//   (pull diagnostics with related information, utf-32 positions), and
//   initializationOptions = {
//     "configurationFile": "/dev/null",
//     "configuration": {"environment": {"extra-paths": SearchDirs(request),
//                                       "python": request.python_executable}}}
// The inline configuration takes precedence over any file; the empty
// configurationFile stops ty from looking for a ty.toml or pyproject.toml in
// the workspace's parents (one in $TMPDIR would otherwise apply and make
// that parent the project root).
nlohmann::json InitializeParams(const std::string& workspace, pid_t host_pid,
                                const TypeCheckRequest& request);

// Equal for two requests exactly when one server serves both: same ty binary
// (resolved path `ty`), python_executable and python_path.
std::string ServerKey(const std::string& ty, const TypeCheckRequest& request);

}  // namespace dolsot::typecheck
