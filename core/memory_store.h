// MemoryStore: an in-process map of session blobs. No TTL, no persistence.
#pragma once

#include <map>
#include <mutex>

#include "core/session_store.h"

namespace dolsot {

class MemoryStore final : public SessionStore {
 public:
  StatusOr<std::optional<std::string>> Load(std::string_view sid) override;
  Status Save(std::string_view sid, std::string_view blob) override;
  Status Append(std::string_view sid, std::string_view bytes) override;
  StatusOr<int> Delete(std::string_view sid) override;
  StatusOr<std::vector<SessionInfo>> List() override;

 private:
  struct Entry {
    std::string blob;
    double written_at = 0;
  };
  std::mutex mutex_;
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace dolsot
