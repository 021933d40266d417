// ProcMasks: what a sandbox's /proc must not show of the host, masked as
// container runtimes mask it: the kernel's command line, the keyrings, the
// kernel's memory, symbol and timer tables, the hardware directories; and
// the host's controls (/proc/sys, sysrq-trigger, ...) read-only.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace dolsot {

// The files under a /proc that a sandbox shows as empty (/dev/null bound
// over them), the directories it shows empty (an empty read-only tmpfs) and
// those it shows read-only, relative to the /proc mount.
const std::vector<std::string>& MaskedProcFiles();
const std::vector<std::string>& MaskedProcDirectories();
const std::vector<std::string>& ReadOnlyProcPaths();

// Masks the /proc mounted at `proc` (a fresh proc of the caller's PID
// namespace, in a mount namespace of the caller's own). `null` is a path of
// a /dev/null to bind over files. What this kernel does not have is
// skipped; a mask that cannot be applied is an error naming it.
Status MaskProc(const std::string& proc, const std::string& null);

}  // namespace dolsot
