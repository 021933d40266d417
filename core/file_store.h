// FileStore: one file per session under a private directory.
//
// Security: the directory is created 0700; FileStore refuses a directory that
// is a symlink, not owned by the current user, or writable by others. Session
// files are opened with O_NOFOLLOW. A save writes a temporary file in the same
// directory, fsyncs it and renames it over the old one, so a writer killed at
// any instant leaves the old session or the new one, never a torn one; several
// processes may share the directory. Files not written for `ttl_days` are
// expired (0 disables expiry): Load treats an expired file as absent and
// deletes it, List reaps every expired file it sees, and Load and Save sweep
// the whole directory at most once per kReapIntervalSeconds, recorded across
// processes by the mtime of a marker file (.reaped), so a save does not cost a
// scan of every session in the directory.
#pragma once

#include <atomic>
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

  // How often Load and Save sweep the directory for expired files.
  static constexpr double kReapIntervalSeconds = 600;
  // The marker file whose mtime records the last sweep.
  static constexpr const char* kReapMarker = ".reaped";

  const std::string& directory() const { return dir_; }
  int ttl_days() const { return ttl_days_; }

 private:
  FileStore(std::string dir, int ttl_days) : dir_(std::move(dir)), ttl_days_(ttl_days) {}
  Status CheckDirectory() const;  // re-checked on every access
  void MaybeReapExpired();         // a sweep, at most once per interval
  void ReapExpired(int dirfd);     // the sweep itself
  bool Expired(double mtime, double now) const { return ttl_days_ > 0 && now - mtime > ttl_days_ * 86400.0; }

  std::string dir_;
  int ttl_days_;
  std::atomic<double> next_reap_{0};  // this process's next sweep, as Unix time
};

}  // namespace dolsot
