// CheckpointSaver: the host's background thread for async checkpoints. It
// reads each checkpoint from the channel a forked copy of the session writes
// it to, and hands it to a save function (the store), in submission order.
//
// Submit runs on the host's critical path (the Result is not back to the
// caller yet), so it wakes no thread: an idle saver sleeps in epoll_wait and
// Submit adds the new channel to its set, so the saver wakes when the writer
// sends (or closes) and not before (a condition variable's notify cost ~30 µs
// here, a cross-CPU wake-up). Stop wakes it through an eventfd.
//
// At most one checkpoint per session waits in the queue: a newer one
// supersedes it (the session coalesces its writers the same way), so a burst
// of cells that outruns a slow writer does not pile up one open channel per
// cell in the host. Superseded channels, like every descriptor queued in the
// DeferredCloser it is given, are closed by the saver thread after each
// checkpoint it handles.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "backend_subprocess/deferred_closer.h"
#include "backend_subprocess/live_session.h"
#include "core/unique_fd.h"

namespace dolsot {

class CheckpointSaver {
 public:
  // Called on the saver thread for every checkpoint that arrived whole, with
  // the tag it was submitted with.
  using SaveFunction =
      std::function<void(const std::string& session_id, CheckpointData data, std::uint64_t tag)>;

  // `closer` (may be null: superseded channels are then closed at once)
  // receives superseded channels, and the saver thread empties it after each
  // checkpoint it handles. It must outlive this saver.
  explicit CheckpointSaver(SaveFunction save, DeferredCloser* closer = nullptr);
  ~CheckpointSaver();  // Stop()
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  // Queues the checkpoint arriving on `channel` for `session_id`, in place of
  // one of that session still waiting (counted as done). Thread-safe.
  // `tag`: the caller's own (which cell the checkpoint follows, say).
  void Submit(std::string session_id, UniqueFd channel, std::uint64_t tag = 0);
  // Returns once every checkpoint submitted before the call is saved (or
  // failed). Thread-safe.
  void Flush();
  // Returns once no checkpoint of `session_id` is queued or being read (a
  // session about to be restored from the store must not miss one still on
  // its way there). Thread-safe.
  void Flush(const std::string& session_id);
  // Gives up the checkpoints of `session_id` (a session reset: its stored
  // state is about to be deleted): those queued are dropped (their writers
  // stop at the shut channel), one being read is abandoned, and it returns
  // once none of them can reach the save function any more (one already
  // read finishes its save first). Thread-safe.
  void Drop(const std::string& session_id);
  // Whether a checkpoint of `session_id` is queued or being read now (one
  // that ends without data, its writer gone, is neither any more).
  // Thread-safe; does not wait.
  bool Pending(const std::string& session_id);
  // Flushes (giving up on checkpoints still unwritten after `patience`:
  // their writers are abandoned), then ends the thread. Idempotent.
  void Stop(std::chrono::milliseconds patience = std::chrono::minutes(10));

 private:
  struct Job {
    std::string session_id;
    UniqueFd channel;
    std::uint64_t tag = 0;
  };
  void Loop();
  bool PendingLocked(const std::string& session_id) const;  // mutex_ held
  void StartLocked();  // the thread and its epoll set, at the first Submit
  // The idle saver sleeps in epoll_wait: has it wake once the front
  // channel is readable (or now, when that cannot be watched).
  void WatchFrontLocked();

  SaveFunction save_;
  DeferredCloser* closer_;
  std::mutex mutex_;
  std::condition_variable changed_;  // finished_ or stopping_ changed
  std::deque<Job> queue_;
  UniqueFd epoll_;   // the idle saver waits here: the front channel and wake_
  UniqueFd wake_;    // eventfd: Stop
  bool idle_ = false;  // the saver thread waits (or is about to) in epoll_wait
  int registered_ = -1;  // the queued channel epoll_ watches for it, or -1
  std::uint64_t submitted_ = 0;
  std::uint64_t finished_ = 0;
  bool stopping_ = false;
  int reading_ = -1;  // the channel being read now (shut down to abandon it)
  std::string handling_;  // the session whose checkpoint is being read or saved
  std::thread thread_;
};

}  // namespace dolsot
