// The session side of a live session: a process holding one session's
// namespace (__main__.__dict__), forked from the worker's child that keeps
// the session (session_keeper.h). It runs every cell
// (the runner); with rollback on, a child it forks after each cell (the
// snapshot) holds the state as it was before the running cell and becomes
// the runner when that cell is killed.
//
// Runs inside the worker's interpreter with the GIL held; never returns.
#pragma once

#include "backend_subprocess/worker_settings.h"
#include "core/unique_fd.h"

namespace dolsot {

// Serves one session on `socket` until the host retires it or goes away.
// `expect_load`: a fresh process that first restores a checkpoint (kLoad).
// `host_pidfd`: a pidfd of the host process (or -1), which a snapshot watches.
// `keeper_link`: the session end of its keeper's channel (session_keeper.h),
// which this process and the engine's forks hold and a cell's forks do not.
[[noreturn]] void ServeSession(UniqueFd socket, const WorkerSettings& settings, bool expect_load,
                               int host_pidfd, UniqueFd keeper_link);

}  // namespace dolsot
