// SpareSession: a new session opened ahead, off the caller's path, so that
// a new session's first cell costs a hand-over, not an open (issue #39).
//
// Every new session of one Repl starts the same: the worker's settings
// (toolboxes, config, sandbox walls) are fixed when the Repl is made, and a
// session process never learns its id (the host names it in each RUN and
// keeps everything else about it, durability and gate memory, in its slot).
// So the Repl opens one ahead exactly as it opens a new session (OPEN to
// the worker, LOAD of an empty blob, its RUNNER frame and first snapshot
// read), on a thread of this class, and binds an id to it only when a new
// session takes it. Only a new session on the worker it came from takes it:
// a session restored from the store, a branch, or a session of a restarted
// worker opens its own, and a spare whose processes are gone is ended.
//
// Ownership: this class owns the spare (a LiveSession, whose destructor
// kills its runner; its snapshot and keeper exit when their sockets close)
// and the one thread that makes it, started by the first Want() and joined
// by Stop(). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "backend_subprocess/live_session.h"
#include "backend_subprocess/protocol.h"
#include "backend_subprocess/worker_process.h"
#include "backend_subprocess/worker_settings.h"
#include "core/status.h"
#include "core/unique_fd.h"

namespace dolsot {

// A session made ahead: the host's handle on it, a duplicate of the host's
// end of its runner's socket, and a pidfd on its runner, both polled at
// hand-over to see that the runner is still there (`watch` is closed then,
// so the runner sees the host go). The pidfd keeps the check off /proc on
// the new session's path; without one (no pidfds) /proc is read there.
struct SpareSessionMade {
  std::unique_ptr<LiveSession> live;
  UniqueFd watch;
  UniqueFd runner;
};

// Opens a new session on `worker` as the Repl opens one (OPEN, LOAD of an
// empty blob) and reads its RUNNER frame, so its first cell waits for no
// fork: what the Repl's SpareSession maker does.
StatusOr<SpareSessionMade> OpenSpareSession(const std::shared_ptr<WorkerProcess>& worker,
                                            const WorkerSettings& settings,
                                            protocol::Deadline deadline);

class SpareSession {
 public:
  using Made = SpareSessionMade;
  // Opens a new session on `worker`, ready for its first RUN; runs on this
  // class's thread.
  using Maker = std::function<StatusOr<Made>(const std::shared_ptr<WorkerProcess>& worker)>;

  // `first_delay`: how long the first spare of each worker waits before it
  // is made, unless a new session waits for it (Take). A worker shares its
  // pages ahead once it has been idle a moment (shared_heap.h: dill, a
  // frozen heap); a session forked before that keeps the worker's pages
  // as they were, ~3.5 MB more for its whole life.
  explicit SpareSession(Maker maker,
                        std::chrono::milliseconds first_delay = std::chrono::milliseconds(0))
      : maker_(std::move(maker)), first_delay_(first_delay) {}
  ~SpareSession() { Stop(); }
  SpareSession(const SpareSession&) = delete;
  SpareSession& operator=(const SpareSession&) = delete;

  // Asks for a spare on `worker` unless one is ready or being made. Returns
  // at once: the making runs on this class's thread. Ignored once stopped.
  void Want(const std::shared_ptr<WorkerProcess>& worker);

  // The spare made on `worker`, waiting until `deadline` for one being made
  // there; null when there is none, it failed, or its runner is gone (such a
  // spare, or one of another worker, is ended here). A ready spare goes
  // first, then a recycled one (Give), then one being made.
  std::unique_ptr<LiveSession> Take(const WorkerProcess* worker, protocol::Deadline deadline);

  // Keeps `recycled`, a session just made new again (LiveSession::Recycle:
  // its runner renewing in place, or its snapshot promoted with its RUNNER
  // frame on the way), for a Take on its worker: a hand-over of processes
  // that exist, not a fork. Holds kMaxRecycled, handed out oldest first (the
  // one given last is still settling when a loop of short sessions asks
  // for the next); another (or any once stopped) is ended here. While one
  // is held, Want makes none.
  void Give(std::unique_ptr<LiveSession> recycled);
  // Whether Give would keep one now (fewer than kMaxRecycled, not stopped).
  bool HasRoomForRecycled();
  static constexpr std::size_t kMaxRecycled = 3;

  // Joins the thread (after the making in progress, if any) and ends the
  // spare. Idempotent; Want() does nothing afterwards.
  void Stop();

  // Tests: waits until a spare is ready (or `deadline`); whether one is.
  bool AwaitReadyForTesting(protocol::Deadline deadline);

 private:
  void Loop();

  Maker maker_;
  const std::chrono::milliseconds first_delay_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::weak_ptr<WorkerProcess> wanted_;          // guarded: the worker to make one on
  bool want_ = false;                            // guarded
  bool making_ = false;                          // guarded
  bool stopping_ = false;                        // guarded
  int takers_ = 0;                               // guarded: Take()s waiting for one
  const WorkerProcess* made_for_ = nullptr;      // guarded: the worker the last one was made on
  Made ready_;                                   // guarded: live is null when none
  std::deque<std::unique_ptr<LiveSession>> recycled_;  // guarded: Give's, oldest first
  std::thread thread_;                           // started by the first Want
};

}  // namespace dolsot
