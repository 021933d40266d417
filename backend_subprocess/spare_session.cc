// A new session opened ahead (see spare_session.h).
#include "backend_subprocess/spare_session.h"

#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <utility>

#include "backend_subprocess/post_cell_pacing.h"

namespace dolsot {
namespace {

// How long a new session waits for a renewed snapshot's RUNNER frame.
constexpr std::chrono::seconds kRecycledPatience{1};

// Whether a spare's runner is still there and has said nothing: it writes
// nothing before its first RUN, so anything readable on the host's end of
// its socket (that end closed, above all) means it cannot take one; when
// pinned, its pidfd must not be readable either (the runner exited).
bool Untouched(const SpareSessionMade& made) {
  if (!made.watch) return false;
  pollfd p[2] = {{made.watch.get(), POLLIN, 0}, {made.runner.get(), POLLIN, 0}};
  const nfds_t n = made.runner ? 2 : 1;
  int ready;
  do {
    ready = ::poll(p, n, 0);
  } while (ready < 0 && errno == EINTR);
  if (ready != 0) return false;
  // Unpinned: the runner itself, read from /proc.
  return made.runner || !made.live->RunnerExited();
}

}  // namespace

StatusOr<SpareSessionMade> OpenSpareSession(const std::shared_ptr<WorkerProcess>& worker,
                                            const WorkerSettings& settings,
                                            protocol::Deadline deadline) {
  auto channel = worker->OpenSession(deadline);
  if (!channel.ok()) return channel.status();
  SpareSessionMade made;
  made.watch.Reset(::fcntl(channel->socket.get(), F_DUPFD_CLOEXEC, 0));
  if (!made.watch) return IoError("a spare session's socket could not be duplicated");
  auto live = LiveSession::Start(std::move(channel).value(), std::string_view(), settings,
                                 deadline, nullptr, worker);
  if (!live.ok()) return live.status();
  // Rollback on: its first snapshot is forked before RUNNER comes.
  DOLSOT_RETURN_IF_ERROR((*live)->Settle(deadline, {}));
  made.live = std::move(live).value();
  made.live->AllowRecycling();
  made.runner = made.live->PinRunner();
  return made;
}

void SpareSession::Want(const std::shared_ptr<WorkerProcess>& worker) {
  if (!worker) return;
  std::lock_guard<std::mutex> guard(mutex_);
  if (stopping_ || making_ || want_ || !recycled_.empty()) return;
  if (ready_.live && ready_.live->worker().lock() == worker) return;
  wanted_ = worker;
  want_ = true;
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  changed_.notify_all();
}

std::unique_ptr<LiveSession> SpareSession::Take(const WorkerProcess* worker,
                                                protocol::Deadline deadline) {
  // A recycled session, when no spare is ready: settled here (a renewed
  // snapshot's RUNNER frame read: it forks its own snapshot first; a runner
  // renewing in place sends none), then it is like any spare. A renewal
  // slower than kRecycledPatience is given up: a new session of its own is
  // the surer path then.
  for (;;) {
    std::unique_ptr<LiveSession> recycled;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (ready_.live || recycled_.empty()) break;
      recycled = std::move(recycled_.front());
      recycled_.pop_front();
    }
    protocol::Deadline settle_by = protocol::Clock::now() + kRecycledPatience;
    if (deadline && *deadline < *settle_by) settle_by = deadline;
    if (recycled->worker().lock().get() == worker && recycled->Settle(settle_by, {}).ok()) {
      return recycled;
    }
  }
  Made taken;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // One being made for this worker is nearer than an open of our own,
    // which would wait for the same worker.
    auto in_progress = [&] {
      return (making_ || want_) && !stopping_ && wanted_.lock().get() == worker;
    };
    if (!ready_.live && in_progress()) {
      ++takers_;  // a first spare waiting out first_delay_ is made now
      changed_.notify_all();
      while (!ready_.live && in_progress()) {
        if (!deadline) {
          changed_.wait(lock);
        } else if (changed_.wait_until(lock, *deadline) == std::cv_status::timeout) {
          break;
        }
      }
      --takers_;
    }
    taken = std::move(ready_);
    ready_ = Made{};
  }
  // Ended outside the lock (a LiveSession's end signals its processes).
  // The runner itself is looked at too: a snapshot it has just forked holds
  // a copy of its socket's end until it runs, so a runner killed a moment
  // ago may not show at the socket yet.
  if (!taken.live || taken.live->worker().lock().get() != worker || !Untouched(taken)) {
    return nullptr;
  }
  return std::move(taken.live);  // `watch` closes here: the host holds one end again
}

void SpareSession::Give(std::unique_ptr<LiveSession> recycled) {
  if (!recycled) return;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!stopping_ && recycled_.size() < kMaxRecycled) {
      recycled_.push_back(std::move(recycled));
      return;
    }
  }
  // Ended outside the lock (its end signals its processes).
}

bool SpareSession::HasRoomForRecycled() {
  std::lock_guard<std::mutex> guard(mutex_);
  return !stopping_ && recycled_.size() < kMaxRecycled;
}

void SpareSession::Stop() {
  Made ended;
  std::deque<std::unique_ptr<LiveSession>> recycled;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
    changed_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> guard(mutex_);
  ended = std::move(ready_);
  ready_ = Made{};
  recycled = std::move(recycled_);
}

bool SpareSession::AwaitReadyForTesting(protocol::Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!ready_.live && !stopping_) {
    if (!deadline) {
      changed_.wait(lock);
    } else if (changed_.wait_until(lock, *deadline) == std::cv_status::timeout) {
      break;
    }
  }
  return ready_.live != nullptr;
}

void SpareSession::Loop() {
  // Batch: woken by the Want() at the end of a new session's cell, this
  // thread must not take the CPU from the caller before run() returns.
  Background batch;
  batch.Set(true);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || want_; });
    if (stopping_) return;
    std::shared_ptr<WorkerProcess> worker = wanted_.lock();
    if (worker && worker.get() != made_for_ && first_delay_.count() > 0) {
      // The worker's first: after it has shared its pages, unless wanted now.
      making_ = true;  // Take() waits for it rather than opening its own
      changed_.wait_for(lock, first_delay_, [this] { return stopping_ || takers_ > 0; });
      if (stopping_) {
        making_ = false;
        changed_.notify_all();
        return;
      }
    }
    made_for_ = worker.get();
    making_ = true;
    want_ = false;
    Made previous = std::move(ready_);  // of another worker (Want): ended below
    ready_ = Made{};
    lock.unlock();
    previous = Made{};
    StatusOr<Made> made = worker ? maker_(worker) : Status(ErrorCode::kUnavailable, "no worker");
    lock.lock();
    making_ = false;
    // A failure leaves no spare: the next new session opens its own, and
    // asks again once it has.
    if (made.ok() && !stopping_) ready_ = std::move(made).value();
    changed_.notify_all();
    if (made.ok() && stopping_) {
      Made late = std::move(made).value();
      lock.unlock();
      late = Made{};
      lock.lock();
    }
  }
}

}  // namespace dolsot
