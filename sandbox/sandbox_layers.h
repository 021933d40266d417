// What every layer of the Sandbox's setup shares (sandbox_setup.cc,
// sandbox_root.cc, sandbox_cgroup.cc): how a layer is reported on or
// missing, errno as text, writing a kernel control file.
#pragma once

#include <string>

#include "core/status.h"
#include "sandbox/sandbox_policy.h"

namespace dolsot::sandbox_layers {

// "<what>: <strerror(errno)>".
std::string Errno(const std::string& what);

// A layer that failed: an error naming it and how to get it, or with
// best_effort a line in the report saying it is off, and why.
Status Missing(const SandboxPolicy& policy, SandboxReport* report, const std::string& layer,
               const std::string& why, const std::string& how);

// A layer that is on, with what it does.
void Active(SandboxReport* report, const std::string& layer, const std::string& detail);

// Writes `text` to the existing file `path` (a /proc or cgroup control file).
Status WriteFile(const std::string& path, const std::string& text);

}  // namespace dolsot::sandbox_layers
