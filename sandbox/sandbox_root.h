// The Sandbox's filesystem layer: a private mount namespace, a new root
// built from the MountPlan (every host path bound from a checked descriptor,
// bind_source.h; a minimal /dev; a masked /proc; the overlays), pivot_root
// into it and the old root detached (nsjail's mnt, here).
#pragma once

#include "core/status.h"
#include "sandbox/sandbox_setup.h"

namespace dolsot {

// Where each overlay's host directory is bound read-only in the new root,
// by index, for the keepers' own overlays (session_walls.h), which detach
// these binds.
inline constexpr char kSessionLowers[] = "/.dolsot-lowers";

// The new root, entered; the old one gone. Layers it reports: overlay.
// Call it in the new mount (and PID) namespace, single-threaded.
Status SwitchRoot(const SandboxSetup& setup, SandboxReport* report);

// Closes every inherited descriptor of a directory: a directory opened
// before the pivot still reaches the host's tree through openat(2).
void CloseDirectoryFds();

}  // namespace dolsot
