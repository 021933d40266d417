// The async checkpoint thread: read a checkpoint from its channel, save it.
#include "backend_subprocess/checkpoint_saver.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include <chrono>
#include <vector>

#include "backend_subprocess/protocol.h"

namespace dolsot {
namespace {
// A serializer that sends nothing for this long is abandoned (its copy of the
// session keeps running nothing; the next checkpoint supersedes it).
constexpr auto kChannelPatience = std::chrono::minutes(10);
}  // namespace

CheckpointSaver::CheckpointSaver(SaveFunction save, DeferredCloser* closer)
    : save_(std::move(save)), closer_(closer) {}

void CheckpointSaver::StartLocked() {
  epoll_.Reset(::epoll_create1(EPOLL_CLOEXEC));
  wake_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = wake_.get();
  if (!wake_ || ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &event) != 0) {
    epoll_.Reset();  // the condition variable then
  }
  thread_ = std::thread([this] { Loop(); });
}

CheckpointSaver::~CheckpointSaver() { Stop(); }

void CheckpointSaver::Submit(std::string session_id, UniqueFd channel, std::uint64_t tag) {
  UniqueFd superseded;
  // Declared after `superseded`, so the lock is released before a close.
  std::unique_lock<std::mutex> guard(mutex_);
  if (stopping_) return;  // the channel closes; its writer exits
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->session_id == session_id) {
      // Not started (the saver pops a job before reading it): the newer
      // state replaces it, and its writer, if it runs, stops at the closed
      // channel.
      superseded = std::move(it->channel);
      queue_.erase(it);
      ++finished_;
      changed_.notify_all();
      break;
    }
  }
  // Its writer must stop now (a writer blocked on a full channel that no one
  // reads would hold up the session's next writer, which waits for it, and
  // with it every later checkpoint): shut down here, closed later.
  if (superseded && superseded.get() == registered_) {
    // The idle saver's wake-up: its readiness must not go with it (a close
    // drops an event epoll_wait has not returned yet), so the new front
    // channel is watched instead, below.
    (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, registered_, nullptr);
    registered_ = -1;
  }
  if (superseded) ::shutdown(superseded.get(), SHUT_RDWR);
  if (superseded && closer_ != nullptr) closer_->Add(std::move(superseded));
  queue_.push_back(Job{std::move(session_id), std::move(channel), tag});
  ++submitted_;
  if (!thread_.joinable()) {
    StartLocked();
    return;  // it looks at the queue before it ever sleeps
  }
  if (!idle_) return;  // the saver reaches this job by itself
  if (!epoll_) {
    changed_.notify_all();  // no epoll: the saver waits on the condition variable
    return;
  }
  if (registered_ >= 0) return;  // it wakes when the front channel is readable
  WatchFrontLocked();
}

void CheckpointSaver::WatchFrontLocked() {
  // The saver sleeps in epoll_wait: it wakes once the front channel is
  // readable, and then takes the jobs in order.
  int fd = queue_.front().channel.get();
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event) == 0) {
    registered_ = fd;
  } else {
    std::uint64_t one = 1;
    (void)::write(wake_.get(), &one, sizeof(one));  // wake it now instead
  }
}

void CheckpointSaver::Drop(const std::string& session_id) {
  std::vector<UniqueFd> dropped;
  // Declared after `dropped`, so the lock is released before the closes.
  std::unique_lock<std::mutex> guard(mutex_);
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->session_id != session_id) {
      ++it;
      continue;
    }
    if (it->channel.get() == registered_) {
      (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, registered_, nullptr);
      registered_ = -1;
    }
    ::shutdown(it->channel.get(), SHUT_RDWR);  // its writer stops now
    dropped.push_back(std::move(it->channel));
    it = queue_.erase(it);
    ++finished_;
  }
  if (!dropped.empty()) {
    changed_.notify_all();
    if (idle_ && epoll_ && registered_ < 0 && !queue_.empty()) WatchFrontLocked();
  }
  // Being read: abandoned (the read fails at once); already read: saved first.
  if (handling_ == session_id && reading_ >= 0) ::shutdown(reading_, SHUT_RDWR);
  changed_.wait(guard, [&] { return stopping_ || handling_ != session_id; });
}

void CheckpointSaver::Flush() {
  std::unique_lock<std::mutex> guard(mutex_);
  std::uint64_t target = submitted_;
  changed_.wait(guard, [&] { return finished_ >= target; });
}

void CheckpointSaver::Flush(const std::string& session_id) {
  std::unique_lock<std::mutex> guard(mutex_);
  changed_.wait(guard, [&] { return stopping_ || !PendingLocked(session_id); });
}

bool CheckpointSaver::Pending(const std::string& session_id) {
  std::lock_guard<std::mutex> guard(mutex_);
  return PendingLocked(session_id);
}

bool CheckpointSaver::PendingLocked(const std::string& session_id) const {
  if (handling_ == session_id) return true;
  for (const Job& job : queue_) {
    if (job.session_id == session_id) return true;
  }
  return false;
}

void CheckpointSaver::Stop(std::chrono::milliseconds patience) {
  {
    std::unique_lock<std::mutex> guard(mutex_);
    bool flushed = changed_.wait_for(guard, patience, [&] { return finished_ >= submitted_; });
    stopping_ = true;
    if (wake_) {
      std::uint64_t one = 1;
      (void)::write(wake_.get(), &one, sizeof(one));
    }
    if (!flushed) {
      // A serializer that hangs must not hang Close: abandon what is left.
      finished_ += queue_.size();
      queue_.clear();
      if (reading_ >= 0) ::shutdown(reading_, SHUT_RDWR);
    }
    changed_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  epoll_.Reset();  // a closed Repl holds no descriptor
  wake_.Reset();
}

void CheckpointSaver::Loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> guard(mutex_);
      while (!stopping_ && queue_.empty()) {
        idle_ = true;
        if (!epoll_) {
          changed_.wait(guard);
          idle_ = false;
          continue;
        }
        guard.unlock();
        epoll_event events[4];
        int n = ::epoll_wait(epoll_.get(), events, 4, -1);
        for (int i = 0; i < n; ++i) {
          if (events[i].data.fd == wake_.get()) {
            std::uint64_t count;
            (void)::read(wake_.get(), &count, sizeof(count));
          }
        }
        guard.lock();
        idle_ = false;
      }
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      if (job.channel.get() == registered_) registered_ = -1;  // removed below
      reading_ = job.channel.get();
      handling_ = job.session_id;
    }
    if (epoll_) (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, job.channel.get(), nullptr);
    auto frame = protocol::ReadFrame(job.channel.get(),
                                     protocol::Clock::now() + kChannelPatience);
    {
      std::lock_guard<std::mutex> guard(mutex_);
      reading_ = -1;
      job.channel.Reset();
    }
    if (frame.ok() && frame->tag == protocol::Tag::kCheckpointData) {
      auto data = ParseCheckpointData(std::move(frame->payload));
      if (data.ok()) save_(job.session_id, std::move(data).value(), job.tag);
    }
    {
      std::lock_guard<std::mutex> guard(mutex_);
      ++finished_;
      handling_.clear();
      changed_.notify_all();
    }
    // Awake anyway, and no cell waits on this thread: close what the host
    // set aside (superseded channels, retired snapshots' sockets).
    if (closer_ != nullptr) closer_->CloseAll();
  }
}

}  // namespace dolsot
