// MemoryStore implementation.
#include "core/memory_store.h"

#include <chrono>

#include "core/session_id.h"

namespace dolsot {
namespace {
double Now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}
}  // namespace

StatusOr<std::optional<std::string>> MemoryStore::Load(std::string_view sid) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(sid));
  std::lock_guard lock(mutex_);
  auto it = entries_.find(sid);
  if (it == entries_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second.blob);
}

Status MemoryStore::Save(std::string_view sid, std::string_view blob) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(sid));
  std::lock_guard lock(mutex_);
  entries_[std::string(sid)] = Entry{std::string(blob), Now()};
  return Status::Ok();
}

Status MemoryStore::Append(std::string_view sid, std::string_view bytes) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(sid));
  std::lock_guard lock(mutex_);
  auto it = entries_.find(sid);
  if (it == entries_.end()) {
    return Status(ErrorCode::kInvalidSession, "no session '" + std::string(sid) + "' to append to");
  }
  it->second.blob.append(bytes);
  it->second.written_at = Now();
  return Status::Ok();
}

StatusOr<int> MemoryStore::Delete(std::string_view sid) {
  DOLSOT_RETURN_IF_ERROR(ValidateResetTarget(sid));
  std::lock_guard lock(mutex_);
  if (sid == kAllSessions) {
    int n = static_cast<int>(entries_.size());
    entries_.clear();
    return n;
  }
  auto it = entries_.find(sid);
  if (it == entries_.end()) return 0;
  entries_.erase(it);
  return 1;
}

StatusOr<std::vector<SessionInfo>> MemoryStore::List() {
  std::lock_guard lock(mutex_);
  std::vector<SessionInfo> out;
  for (const auto& [id, e] : entries_) out.push_back({id, e.blob.size(), e.written_at});
  return out;
}

}  // namespace dolsot
