// ExitRecords: how the session processes of one worker ended, for the host
// that asks why a runner died (EXIT_STATUS).
//
// A runner is reaped by its session's keeper (session_keeper.h), not by the
// worker the host asks, so the record lives in one page-sized ring shared
// by the worker and every keeper it forks (an anonymous shared mapping made
// before the first session). Writers take a slot with an atomic counter and
// publish it with a sequence number; a reader never blocks a writer and
// skips a slot being written. Record is async-signal-safe.
#pragma once

#include <sys/types.h>

#include <optional>

namespace dolsot::exit_records {

// Maps the ring (once, in the worker before any fork). Without it (mmap
// failed) records stay in the process that made them.
void Share();
// Unmaps it in a process that must not write it (a session process runs
// the cells' code).
void Detach();
// Notes that `pid` ended with wait status `status`.
void Record(pid_t pid, int status);
// The wait status recorded last for `pid`, if any is still in the ring.
std::optional<int> Find(pid_t pid);

}  // namespace dolsot::exit_records
