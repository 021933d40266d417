// FileStore: one file per session under a private directory.
//
// Security: a checkpoint runs code when it is loaded, so only the user (and
// root) may be able to put or swap anything on the way to a session file.
// Every access walks the path from "/" one component at a time (openat with
// O_NOFOLLOW) and checks each directory on the descriptor it then uses, so
// nothing can be swapped between the check and the use:
//   - the session directory itself must be a real directory (not a symlink),
//     owned by the current user and not writable by group or others;
//   - every directory above it must be owned by root or the current user, and
//     not writable by group or others unless it has the sticky bit (/tmp):
//     whoever can write a directory without it can rename our entry away and
//     put their own in its place, and a directory's owner can always do so.
//     This is OpenSSH's rule for the paths it trusts (safe_path), with the
//     sticky-bit exception because our entries there are ours or root's;
//   - a symlink on the way (/home -> var/home) is followed only if it is owned
//     by root or the current user (no one else can then repoint it); its
//     target is walked by the same rules. At most 40 are followed.
// This covers the default layout {tempdir}/dolsot-{uid}/sessions: a
// dolsot-{uid} another user made first (theirs, open to others, or their
// symlink) is refused, never used. Missing directories are created 0700, each
// inside a directory that has just passed the check. ACLs are not read. A
// relative path is made absolute (against the working directory) at Open.
// Session files are opened with O_NOFOLLOW and must be the user's own.
//
// Writes: a save writes a temporary file in the same directory, fsyncs it and
// renames it over the old one, so a writer killed at any instant leaves the
// old session or the new one, never a torn one; several processes may share
// the directory. The temporary file is named .{sid}.flock-{boot}-{random}.tmp
// and its writer holds an exclusive flock() on it from before its first byte
// until after the rename. The lock is the writer's identity: the kernel drops
// it when the writer dies (SIGKILL included), whatever happens to its pid
// afterwards, so pid reuse cannot fool the sweep, and unlike a pid it needs no
// /proc of the writer's pid namespace. {boot} is the writer's kernel
// (/proc/sys/kernel/random/boot_id): a lock is certain to be visible only to
// the kernel that holds it (NFS mounted with local_lock or nolock keeps
// locks local), so a sweep trusts the lock only for files of its own kernel.
//
// Sweeps: files not written for `ttl_days` are expired (0 disables expiry):
// Load treats an expired file as absent and deletes it, List reaps every
// expired file it sees, and Load and Save sweep the whole directory at most
// once per kReapIntervalSeconds, recorded across processes by the mtime of a
// marker file (.reaped), so a save does not cost a scan of every session. The
// same sweeps remove temporary files no live writer holds:
//   - of this kernel: as soon as a shared flock on it succeeds (its writer is
//     gone) and it is not empty (a writer locks before its first byte; an
//     empty one may be a writer's between create and lock, and waits for
//     kStaleTempSeconds); the writer re-checks after locking that its file is
//     still linked, so a sweep can never remove a file a live writer uses;
//   - of another kernel (another host on NFS, or before a reboot), named by
//     an older dolsot, or on a filesystem without flock: once not written for
//     kStaleTempSeconds.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/session_store.h"
#include "core/unique_fd.h"

namespace dolsot {

class FileStore final : public SessionStore {
 public:
  // Opens (creating it and missing parents 0700 if needed) the session
  // directory `dir`, checked as above. Errors: kPermission naming the
  // directory at fault and what is wrong with it, kIo, kInvalidArgument.
  static StatusOr<std::unique_ptr<FileStore>> Open(std::string dir, int ttl_days);

  StatusOr<std::optional<std::string>> Load(std::string_view sid) override;
  Status Save(std::string_view sid, std::string_view blob) override;
  StatusOr<int> Delete(std::string_view sid) override;
  StatusOr<std::vector<SessionInfo>> List() override;

  // How often Load and Save sweep the directory for expired files.
  static constexpr double kReapIntervalSeconds = 600;
  // The marker file whose mtime records the last sweep.
  static constexpr const char* kReapMarker = ".reaped";
  // A temporary file no live writer is known to hold goes after this long.
  static constexpr double kStaleTempSeconds = 3600;

  // The session directory, absolute.
  const std::string& directory() const { return dir_; }
  int ttl_days() const { return ttl_days_; }

 private:
  FileStore(std::string dir, int ttl_days) : dir_(std::move(dir)), ttl_days_(ttl_days) {}
  // The session directory, walked and checked on every access.
  StatusOr<UniqueFd> OpenDirectory(bool create = false) const;
  StatusOr<std::vector<SessionInfo>> ListIn(int dirfd);
  void MaybeReapExpired(int dirfd);  // a sweep, at most once per interval
  void ReapExpired(int dirfd);       // the sweep itself
  bool Expired(double mtime, double now) const { return ttl_days_ > 0 && now - mtime > ttl_days_ * 86400.0; }

  std::string dir_;
  int ttl_days_;
  std::atomic<double> next_reap_{0};  // this process's next sweep, as Unix time
};

}  // namespace dolsot
