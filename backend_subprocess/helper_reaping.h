// AwaitReadableReaping: a session process's idle wait that also reaps its
// helper children (checkpoint writers, retired snapshots) as they exit, so
// none waits as a zombie until the next cell (issue #39: an idle session
// held four processes, one of them a zombie).
#pragma once

#include <sys/types.h>

#include <vector>

namespace dolsot {

// Waits until `socket` is readable (or hung up), reaping every pid of
// `helpers` (children of this process) that exits meanwhile and removing
// it. Each helper is watched through a pidfd opened for the wait; without
// pidfds (a kernel before 5.3) it only reaps what has exited already and
// returns at once. Never reaps any other child: a cell's own children are
// the cell's to wait for. Call without the GIL; EINTR is retried.
void AwaitReadableReaping(int socket, std::vector<pid_t>* helpers);

// Reaps the helpers that have exited (WNOHANG), removing them.
void ReapExitedHelpers(std::vector<pid_t>* helpers);

}  // namespace dolsot
