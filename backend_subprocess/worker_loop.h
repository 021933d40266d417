// The worker: a fork server (zygote). It reads the host's kHello, imports the
// toolboxes once, then forks one session process per kOpen. Both entry points
// (the dolsot-worker executable and `python -m dolsot._worker`) call RunWorker.
#pragma once

namespace dolsot {

// Serves the host on `socket_fd` (takes ownership) until it says kShutdown or
// goes away; then kills every process it forked and returns the exit status.
// Needs the GIL (an initialized interpreter, the calling thread holding it).
// Returns only in the worker itself: a forked session process never returns.
int RunWorker(int socket_fd);

// The fd named by DOLSOT_WORKER_FD, or -1 when unset or malformed.
int WorkerFdFromEnvironment();

}  // namespace dolsot
