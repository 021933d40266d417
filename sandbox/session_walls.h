// SessionWalls: the walls between the sessions of one sandboxed worker. The
// worker's walls (sandbox_setup.h) keep the host out; these keep one session
// lineage (a session and the branches made from it) out of another's. Each
// session's keeper (backend_subprocess/session_keeper.h) puts them up once,
// before it forks the session's first process, so every process of the
// lineage (runners, snapshots, checkpoint writers, what cells start) is
// inside them and a cell never pays for them:
//   - a mount namespace of its own with a fresh size-capped tmpfs on /tmp
//     (the scratch: cwd, HOME, TMPDIR) and on /dev/shm, its own overlays
//     (a writable layer of its own over each policy overlay), and a /proc
//     mounted with hidepid=2, which lists only the processes it may
//     ptrace-read;
//     an IPC namespace of its own (System V IPC, POSIX message queues);
//   - a Landlock domain of its own (the worker's filesystem rules; ABI 6+:
//     signals and abstract unix sockets scoped to the domain). Landlock
//     also refuses ptrace-class access across domains: /proc/<pid>/mem,
//     environ, fd, maps, root and cwd, and process_vm_readv;
//   - every capability dropped, then the full seccomp filter.
// The worker keeps what the keepers need (CAP_SYS_ADMIN, CAP_SETPCAP, the
// file capabilities overlayfs checks of a mounter) over its own namespaces, no Landlock
// domain and a filter that leaves mount, umount2, unshare and Landlock's
// calls to the keepers (docs/sandbox.md gives the trust argument).
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "sandbox/landlock_ruleset.h"

namespace dolsot {

// An overlay mount of the policy: the host directory (bound read-only at
// `lower` in the worker's namespace) and where the session sees it. `hides`:
// the paths under `target` that must stay hidden (the store, the host's
// cwd: the plan's kHide targets), covered again on top of the session's
// overlay, which would otherwise show the host directory whole.
struct SessionOverlay {
  std::string lower;
  std::string target;
  std::vector<std::string> hides;
};

struct SessionWalls {
  // A mount and an IPC namespace with its own /tmp, /dev/shm, /proc and
  // System V IPC (needs CAP_SYS_ADMIN in the worker's user namespace).
  bool private_mounts = false;
  std::uint64_t disk_mb = 0;  // each of /tmp, /dev/shm, the overlays' layer; 0: no cap
  // Overlays of the session's own over the worker's: a writable layer per
  // session (needs private_mounts). The `lower` binds are detached after.
  std::vector<SessionOverlay> overlays;
  bool landlock = false;      // a Landlock domain of its own, by `paths`
  LandlockPaths paths;
  std::vector<sock_filter> seccomp;  // installed last; empty: none
};

// overlayfs at `target` with `lower` its read-only layer and the writable
// one in the directory `layer` (its upper/ and work/ made here). Tries the
// `userxattr` option first (5.11+: the overlay's own xattrs in the user.*
// namespace, which a user namespace may write), then without it.
Status MountOverlayfs(const std::string& lower, const std::string& target,
                      const std::string& layer);

// Puts the walls up around the calling process, which must be
// single-threaded (a keeper). Every capability is dropped whatever the
// walls hold. An error names the step that failed; the caller must then
// not run a session.
Status ApplySessionWalls(const SessionWalls& walls);

// Checks that `walls` can be put up here: a child applies them and reports.
// Call it once in the worker before it serves any session, so that a wall
// this kernel refuses fails the worker's start, not a session's.
Status ProbeSessionWalls(const SessionWalls& walls);

// Empties the ambient and inheritable sets, and the bounding, effective and
// permitted ones but for the capabilities in `keep` (bit N: capability N).
// Dropping from the bounding set needs CAP_SETPCAP: a worker that keeps
// capabilities for its keepers keeps that one too.
Status DropCapabilities(std::uint64_t keep);

}  // namespace dolsot
