// LiveOutputStream (see live_output_stream.h).
#include "core/live_output_stream.h"

#include <utility>

#include "core/bounded_text.h"
#include "core/utf8.h"

namespace dolsot {
namespace {

// The length a UTF-8 lead byte announces (1 for anything else).
std::size_t AnnouncedLength(unsigned char lead) {
  if (lead >= 0xF0 && lead <= 0xF7) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

// Bytes at the end of `text` that begin a sequence the text cuts short (0-3).
std::size_t IncompleteTail(std::string_view text) {
  const std::size_t n = text.size();
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    auto c = static_cast<unsigned char>(text[n - back]);
    if (IsUtf8ContinuationByte(c)) continue;
    return AnnouncedLength(c) > back ? back : 0;
  }
  return 0;
}

// Byte offset where code point number `n` (0-based) starts, or text.size().
std::size_t OffsetOfCodePoint(std::string_view text, std::size_t n) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (IsUtf8ContinuationByte(static_cast<unsigned char>(text[i]))) continue;
    if (seen++ == n) return i;
  }
  return text.size();
}

std::string CutNotice(std::size_t max_output) {
  return "\n\n[... output past " + std::to_string(max_output) +
         " characters is not streamed (the Result keeps its head and tail); keep large results "
         "in a variable and print only a slice of them ...]\n\n";
}

std::string DroppedNotice(std::size_t chars, std::size_t images) {
  std::string what = std::to_string(chars) + " characters";
  if (images != 0) what += " and " + std::to_string(images) + " figures";
  return "\n[... " + what + " dropped here: on_output was slower than the cell wrote ...]\n";
}

}  // namespace

LiveOutputStream::LiveOutputStream(OutputCallbacks callbacks, std::size_t max_output)
    : callbacks_(std::move(callbacks)), max_output_(max_output) {}

LiveOutputStream::~LiveOutputStream() { Finish(); }

void LiveOutputStream::Text(std::string_view utf8) {
  if (!callbacks_.on_output || utf8.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_ || cut_) return;
  std::string joined;
  if (!carry_.empty()) {
    joined = std::move(carry_) + std::string(utf8);
    carry_.clear();
    utf8 = joined;
  }
  const std::size_t held_back = IncompleteTail(utf8);
  if (held_back != 0) {
    carry_.assign(utf8.substr(utf8.size() - held_back));
    utf8.remove_suffix(held_back);
    if (utf8.empty()) return;
  }
  std::size_t chars = CountCodePoints(utf8);
  if (max_output_ != 0 && passed_chars_ + chars > max_output_) {
    const std::size_t room = max_output_ - passed_chars_;
    utf8 = utf8.substr(0, OffsetOfCodePoint(utf8, room));
    if (!utf8.empty()) EnqueueLocked(false, utf8, room);
    passed_chars_ = max_output_;
    cut_ = true;
    carry_.clear();
    const std::string notice = CutNotice(max_output_);
    EnqueueLocked(false, notice, CountCodePoints(notice));
    return;
  }
  passed_chars_ += chars;
  EnqueueLocked(false, utf8, chars);
}

void LiveOutputStream::Image(std::string_view png) {
  if (!callbacks_.on_image) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  EnqueueLocked(true, png, 0);
}

void LiveOutputStream::EnqueueLocked(bool image, std::string_view bytes, std::size_t chars) {
  const bool full = image ? queued_images_ >= kMaxQueuedImages ||
                               queued_image_bytes_ + bytes.size() > kMaxQueuedImageBytes
                         : queued_bytes_ + bytes.size() > kMaxQueuedBytes;
  if (full) {
    (image ? dropped_images_ : dropped_chars_) += image ? 1 : chars;
    return;
  }
  if ((dropped_chars_ != 0 || dropped_images_ != 0) && callbacks_.on_output) {
    const std::string notice = DroppedNotice(dropped_chars_, dropped_images_);
    dropped_chars_ = dropped_images_ = 0;
    items_.push_back(Item{false, notice});
    queued_bytes_ += notice.size();
  }
  if (!image && !items_.empty() && !items_.back().image) {
    items_.back().bytes.append(bytes);
  } else {
    items_.push_back(Item{image, std::string(bytes)});
  }
  if (image) {
    ++queued_images_;
    queued_image_bytes_ += bytes.size();
  } else {
    queued_bytes_ += bytes.size();
  }
  ++queued_seq_;
  StartOrWakeLocked();
}

void LiveOutputStream::StartOrWakeLocked() {
  if (!thread_started_) {
    thread_started_ = true;
    thread_ = std::thread([this] { DeliverLoop(); });
  } else if (idle_) {  // gathering, it takes this with the rest when due
    wake_.notify_one();
  }
}

void LiveOutputStream::SetPull(std::function<void()> pull) {
  std::lock_guard<std::mutex> pulling(pull_mutex_);
  pull_ = std::move(pull);
}

void LiveOutputStream::Poke() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  poked_ = true;
  StartOrWakeLocked();
}

void LiveOutputStream::Pull() {
  std::lock_guard<std::mutex> pulling(pull_mutex_);
  if (pull_) pull_();
}

void LiveOutputStream::DeliverLoop() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(mutex_);
  Clock::time_point last_taken{};
  for (;;) {
    idle_ = true;
    wake_.wait(lock, [&] { return !items_.empty() || poked_ || stopping_; });
    idle_ = false;
    if (poked_) {
      // What the producer keeps goes through Text, so it counts and merges as
      // any chunk (the gathering below then waits for more).
      poked_ = false;
      lock.unlock();
      Pull();
      lock.lock();
    }
    if (items_.empty() && !stopping_) continue;  // the pull held nothing to deliver
    if (items_.empty()) {  // stopping, and everything delivered
      thread_done_ = true;
      delivered_.notify_all();
      return;
    }
    // The first chunk after a pause goes at once; while output flows, what
    // comes within kGather of the last batch joins the next one (a flood of
    // small writes costs a call per kGather, not one per write).
    const Clock::time_point due = last_taken + kGather;
    if (Clock::now() < due) {
      wake_.wait_until(lock, due, [&] { return stopping_ || flushing_ != 0; });
    }
    if (poked_) {  // what came while gathering
      poked_ = false;
      lock.unlock();
      Pull();
      lock.lock();
    }
    last_taken = Clock::now();
    std::deque<Item> batch;
    batch.swap(items_);
    queued_bytes_ = queued_images_ = queued_image_bytes_ = 0;
    const std::uint64_t upto = queued_seq_;
    lock.unlock();
    for (const Item& item : batch) {
      try {
        if (item.image) {
          callbacks_.on_image(item.bytes);
        } else {
          callbacks_.on_output(item.bytes);
        }
      } catch (...) {
        // A callback must not throw; the cell goes on all the same.
      }
    }
    lock.lock();
    delivered_seq_ = upto;
    delivered_.notify_all();
  }
}

void LiveOutputStream::Flush() {
  Pull();  // what the producer keeps, queued first
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint64_t target = queued_seq_;
  ++flushing_;  // no gathering while someone waits
  wake_.notify_one();
  delivered_.wait(lock,
                  [&] { return delivered_seq_ >= target || !thread_started_ || thread_done_; });
  --flushing_;
}

void LiveOutputStream::Finish() {
  std::lock_guard<std::mutex> finishing(finish_mutex_);
  Pull();  // the producer's last text
  SetPull(nullptr);  // never called again (the producer may go)
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return;
    finished_ = true;  // later producers are ignored from here on
    carry_.clear();
    if ((dropped_chars_ != 0 || dropped_images_ != 0) && callbacks_.on_output) {
      const std::string notice = DroppedNotice(dropped_chars_, dropped_images_);
      dropped_chars_ = dropped_images_ = 0;
      items_.push_back(Item{false, notice});
      ++queued_seq_;
      if (!thread_started_) {
        thread_started_ = true;
        thread_ = std::thread([this] { DeliverLoop(); });
      }
    }
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();  // only Finish joins, under finish_mutex_
}

}  // namespace dolsot
