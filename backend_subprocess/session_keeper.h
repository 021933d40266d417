// SessionKeeper: one small process per session lineage (a session and the
// branches made from it), the child subreaper above its runners, so that a
// rolled-back cell leaves nothing running.
//
// The host kills a runner's process group when its cell is killed, but a
// process the cell started in a session of its own (setsid,
// start_new_session=True, a daemon's double fork) is in no group the host
// knows. Every process below the keeper that loses its parent is
// reparented to the keeper, not to the worker, whatever it did: so a
// lineage's processes never mix with another session's.
//
// The engine's own processes of the lineage (runners, snapshots, checkpoint
// writers, branches) hold the session end of the keeper's channel: an
// engine fork passes it on, a fork a cell makes closes it (fork_guard.h),
// exec closes it (close-on-exec). That is how the keeper tells them apart
// from what the cells started:
//   - A promoted snapshot asks for a sweep before it runs its first cell
//     (AwaitSweep): the keeper kills every child of its own that does not
//     hold the channel, and theirs, and answers. The killed runner's
//     children are its children by then (the snapshot waited for the runner
//     to be gone), so the session is exactly as before the cell: the state
//     of the snapshot, and no process a cell of the lineage started.
//   - When no process holds the session end any more (the session closed,
//     its worker died), the keeper kills what is left and exits.
// The keeper reaps every process reparented to it (no zombies) and records
// how runners ended for the worker (exit_records.h).
//
// A cell that keeps a copy of the channel (os.dup, then a child with
// close_fds=False) keeps that child alive past a sweep: it harms only its
// own lineage, as killing its own snapshot would.
#pragma once

#include "core/status.h"
#include "core/unique_fd.h"
#include "sandbox/session_walls.h"

namespace dolsot {

// In a fresh child of the worker (forked by ForkKeeper, engine_fork.h: it
// must run no Python; its own process group, SIGCHLD default): makes it the
// keeper of a new session, puts up `walls` around itself (a
// sandboxed worker's, session_walls.h; nullptr for none), and forks the
// session's first process below it, inside them. Returns in that process,
// with the session end of the keeper's channel. In the keeper, writes the
// first process's pid to `report_fd` (4 bytes, native order) and never
// returns; when it cannot start (its walls included), the keeper exits
// without writing.
UniqueFd BecomeKeeper(int report_fd, const SessionWalls* walls);

// A session forked ahead: the worker keeps one keeper and first process
// ready (worker_loop.cc's SpareSession), so a new session's path holds no fork. In
// that first process: waits on `command` (a SOCK_SEQPACKET socket) for the
// session's socket (SCM_RIGHTS) and returns it; exits when `command` closes
// first (the worker let the spare go, or stopped).
UniqueFd AwaitSessionSocket(UniqueFd command);

// In the worker: hands `session_socket` to the spare's first process on
// `command`; false when it is gone.
bool HandSessionSocket(int command, int session_socket);

// In the worker: the pid a keeper reports on `fd` (BecomeKeeper's
// report_fd), waiting at most `patience_ms` (through EINTR: a keeper ending
// sends the worker SIGCHLD); -1 when none comes. Call it without the GIL.
pid_t AwaitReportedPid(int fd, int patience_ms);

// In a promoted snapshot, before its first cell: asks the keeper on `link`
// (the session end) to kill what the dead runner's cells left running, and
// waits until it has (at most `patience_ms`; a keeper that is gone answers
// at once). Call it without the GIL: it blocks.
void AwaitSweep(int link, int patience_ms);

}  // namespace dolsot
