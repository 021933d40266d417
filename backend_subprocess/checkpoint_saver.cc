// The async checkpoint thread: read a checkpoint from its channel, save it.
#include "backend_subprocess/checkpoint_saver.h"

#include <sys/socket.h>

#include <chrono>

#include "backend_subprocess/protocol.h"

namespace dolsot {
namespace {
// A serializer that sends nothing for this long is abandoned (its copy of the
// session keeps running nothing; the next checkpoint supersedes it).
constexpr auto kChannelPatience = std::chrono::minutes(10);
}  // namespace

CheckpointSaver::~CheckpointSaver() { Stop(); }

void CheckpointSaver::Submit(std::string session_id, UniqueFd channel) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (stopping_) return;  // the channel closes; its writer exits
  queue_.push_back(Job{std::move(session_id), std::move(channel)});
  ++submitted_;
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  changed_.notify_all();
}

void CheckpointSaver::Flush() {
  std::unique_lock<std::mutex> guard(mutex_);
  std::uint64_t target = submitted_;
  changed_.wait(guard, [&] { return finished_ >= target; });
}

void CheckpointSaver::Stop(std::chrono::milliseconds patience) {
  {
    std::unique_lock<std::mutex> guard(mutex_);
    bool flushed = changed_.wait_for(guard, patience, [&] { return finished_ >= submitted_; });
    stopping_ = true;
    if (!flushed) {
      // A serializer that hangs must not hang Close: abandon what is left.
      finished_ += queue_.size();
      queue_.clear();
      if (reading_ >= 0) ::shutdown(reading_, SHUT_RDWR);
    }
    changed_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void CheckpointSaver::Loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> guard(mutex_);
      changed_.wait(guard, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      reading_ = job.channel.get();
    }
    auto frame = protocol::ReadFrame(job.channel.get(),
                                     protocol::Clock::now() + kChannelPatience);
    {
      std::lock_guard<std::mutex> guard(mutex_);
      reading_ = -1;
      job.channel.Reset();
    }
    if (frame.ok() && frame->tag == protocol::Tag::kCheckpointData) {
      auto data = ParseCheckpointData(frame->payload);
      if (data.ok()) save_(job.session_id, std::move(data).value());
    }
    std::lock_guard<std::mutex> guard(mutex_);
    ++finished_;
    changed_.notify_all();
  }
}

}  // namespace dolsot
