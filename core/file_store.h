// FileStore: one file per session under a private directory.
//
// Security: the directory is created 0700; FileStore refuses a directory that
// is a symlink, not owned by the current user, or writable by others. Session
// files are opened with O_NOFOLLOW. A save writes a temporary file in the same
// directory, fsyncs it and renames it over the old one, so a writer killed at
// any instant leaves the old session or the new one, never a torn one; several
// processes may share the directory. Files not written for `ttl_days` are
// reaped on each access (0 disables reaping).
#pragma once

#include <memory>
#include <string>

#include "core/session_store.h"

namespace dolsot {

class FileStore final : public SessionStore {
 public:
  // Opens (creating it 0700 if needed) the session directory `dir`.
  static StatusOr<std::unique_ptr<FileStore>> Open(std::string dir, int ttl_days);

  StatusOr<std::optional<std::string>> Load(std::string_view sid) override;
  Status Save(std::string_view sid, std::string_view blob) override;
  StatusOr<int> Delete(std::string_view sid) override;
  StatusOr<std::vector<SessionInfo>> List() override;

  const std::string& directory() const { return dir_; }
  int ttl_days() const { return ttl_days_; }

 private:
  FileStore(std::string dir, int ttl_days) : dir_(std::move(dir)), ttl_days_(ttl_days) {}
  Status CheckDirectory() const;  // re-checked on every access
  void ReapExpired();

  std::string dir_;
  int ttl_days_;
};

}  // namespace dolsot
