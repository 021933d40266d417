// CheckpointSaver: the host's background thread for async checkpoints. It
// reads each checkpoint from the channel a forked copy of the session writes
// it to, and hands it to a save function (the store), in submission order.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "backend_subprocess/live_session.h"
#include "backend_subprocess/unique_fd.h"

namespace dolsot {

class CheckpointSaver {
 public:
  // Called on the saver thread for every checkpoint that arrived whole.
  using SaveFunction = std::function<void(const std::string& session_id, CheckpointData data)>;

  explicit CheckpointSaver(SaveFunction save) : save_(std::move(save)) {}
  ~CheckpointSaver();  // Stop()
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  // Queues the checkpoint arriving on `channel` for `session_id`. Thread-safe.
  void Submit(std::string session_id, UniqueFd channel);
  // Returns once every checkpoint submitted before the call is saved (or
  // failed). Thread-safe.
  void Flush();
  // Flushes (giving up on checkpoints still unwritten after `patience`:
  // their writers are abandoned), then ends the thread. Idempotent.
  void Stop(std::chrono::milliseconds patience = std::chrono::minutes(10));

 private:
  struct Job {
    std::string session_id;
    UniqueFd channel;
  };
  void Loop();

  SaveFunction save_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  std::uint64_t submitted_ = 0;
  std::uint64_t finished_ = 0;
  bool stopping_ = false;
  int reading_ = -1;  // the channel being read now (shut down to abandon it)
  std::thread thread_;
};

}  // namespace dolsot
