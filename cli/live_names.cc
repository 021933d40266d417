// LiveNames (see live_names.h).
#include "cli/live_names.h"

#include <algorithm>

namespace dolsot::cli {

void LiveNames::Note(const std::string& sid, const StatusOr<Result>& result) {
  const bool lost = !result.ok() || result->outcome() == Outcome::kCrashed ||
                    result->outcome() == Outcome::kWorkerLost;
  std::vector<std::string> names;
  if (!lost) {
    names = result->held;
    std::sort(names.begin(), names.end());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (lost) {
    names_.erase(sid);
  } else {
    names_[sid] = std::move(names);
  }
}

void LiveNames::Forget(const std::string& sid) {
  std::lock_guard<std::mutex> lock(mutex_);
  names_.erase(sid);
}

void LiveNames::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  names_.clear();
}

std::optional<std::vector<std::string>> LiveNames::Find(const std::string& sid) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = names_.find(sid);
  if (it == names_.end()) return std::nullopt;
  return it->second;
}

}  // namespace dolsot::cli
