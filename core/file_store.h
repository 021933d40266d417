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
// Appends (a checkpoint's journal frames) go to {sid}.session itself with
// O_APPEND (O_NOFOLLOW, a regular file of the user's, not expired), then
// fdatasync; a failed write is cut off again. A crash mid-append may leave
// part of a frame, which the journal's reader finds. Never while a pending
// file exists (Append's comment). With deferred durability an append waits
// for the session's previous flush, and the flusher does its fdatasync.
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
//
// Deferred durability (FileStoreOptions::defer_durability, the dolsot
// server's store; the default is the synchronous save above): a save writes
// the blob and a trailer (pending_file.h: length and CRC-32C) to a locked
// temporary file, renames it to {sid}.pending and returns, with no fsync:
// the bytes are in the kernel, so a process killed after the save loses
// nothing. A flusher thread then writes {sid}.session the synchronous way
// (fsync of the file, rename, fsync of the directory) from the pending
// file's blob, copied file to file by the kernel (copy_file_range: the
// store keeps no copy of the blob in memory meanwhile), and removes the
// pending file. Only a machine crash or a power loss can lose a pending
// file's bytes; it may then be torn, and PendingBlob refuses it. So:
//   - Load prefers {sid}.pending when it is whole and intact (a save whose
//     flush never ran: its process was killed), and first makes it the
//     session file (the flush its writer did not do) and removes it; a
//     pending file that is not whole is removed and {sid}.session, the last
//     durable checkpoint, is used. In every mode, so a direct call after a
//     killed server sees what the server answered;
//   - a save of a session waits for that session's previous flush, so a
//     pending file never replaces one not yet durable; Delete, Release and
//     Load (in this store) wait for it too, and Flush() waits for all;
//   - a save that fails (ENOSPC, EIO, EFBIG while writing the pending file)
//     fails as always; a flush that fails is kept for TakeFlushError (and
//     given to the log function), and the pending file stays for Load.
// A pending file is read like a session file: O_NOFOLLOW, a regular file
// owned by the user, inside the checked directory; it expires the same way.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "core/session_store.h"
#include "core/unique_fd.h"

#include <sys/types.h>

namespace dolsot {

struct FileStoreOptions {
  // Save returns once the bytes are in the kernel; a flusher thread makes
  // them durable right after (above, "Deferred durability").
  bool defer_durability = false;
  // Called on the flusher thread with a line naming a flush that failed.
  std::function<void(const std::string&)> log;
  // Tests: called on the flusher thread before each flush.
  std::function<void()> before_flush;
};

class FileStore final : public SessionStore {
 public:
  // Opens (creating it and missing parents 0700 if needed) the session
  // directory `dir`, checked as above. Errors: kPermission naming the
  // directory at fault and what is wrong with it, kIo, kInvalidArgument.
  static StatusOr<std::unique_ptr<FileStore>> Open(std::string dir, int ttl_days,
                                                   FileStoreOptions options = {});
  ~FileStore() override;  // Flush(), then the flusher thread ends

  StatusOr<std::optional<std::string>> Load(std::string_view sid) override;
  Status Save(std::string_view sid, std::string_view blob) override;
  // Appends to the session file (O_APPEND, then fdatasync; with
  // defer_durability the flusher's fdatasync, after the previous flush of
  // the session); a failed write is cut off again. kUnavailable while a
  // pending file exists (a whole save is due).
  Status Append(std::string_view sid, std::string_view bytes) override;
  StatusOr<int> Delete(std::string_view sid) override;
  StatusOr<std::vector<SessionInfo>> List() override;
  // Waits until `sid`'s last save is durable (or its flush failed).
  Status Release(std::string_view sid) override;

  // Waits until every save made before the call is durable or has failed;
  // the failures not yet taken (TakeFlushError), one per session, else OK.
  Status Flush();
  // The failure of `sid`'s last flush, once (then forgotten), or nullopt.
  std::optional<std::string> TakeFlushError(std::string_view sid);

  // How often Load and Save sweep the directory for expired files.
  static constexpr double kReapIntervalSeconds = 600;
  // The marker file whose mtime records the last sweep.
  static constexpr const char* kReapMarker = ".reaped";
  // A temporary file no live writer is known to hold goes after this long.
  static constexpr double kStaleTempSeconds = 3600;

  // A session's pending file: {sid} + this.
  static constexpr const char* kPendingSuffix = ".pending";

  // The session directory, absolute.
  const std::string& directory() const { return dir_; }
  int ttl_days() const { return ttl_days_; }

 private:
  FileStore(std::string dir, int ttl_days, FileStoreOptions options)
      : dir_(std::move(dir)), ttl_days_(ttl_days), options_(std::move(options)) {}
  // A save made durable: temporary file, fsync, rename, fsync of `dirfd`.
  Status WriteDurable(int dirfd, std::string_view sid, std::string_view blob);
  // The same, its bytes written into the temporary file by `fill`.
  Status WriteDurableBy(int dirfd, std::string_view sid, const std::function<Status(int)>& fill);
  // The flusher's: {sid}.pending (inode `id`) made durable as {sid}.session,
  // its blob copied file to file in the kernel (no copy of it is kept in
  // memory until then), then removed.
  Status FlushPending(int dirfd, const std::string& sid, std::pair<dev_t, ino_t> id);
  // A save handed to the kernel: {sid}.pending, no fsync. Its inode in `id`.
  Status WritePending(int dirfd, std::string_view sid, std::string_view blob,
                      std::pair<dev_t, ino_t>& id);
  // {sid}.pending made the session file when whole (its blob returned), else
  // removed; nullopt when there is none (or it was torn).
  StatusOr<std::optional<std::string>> TakePending(int dirfd, std::string_view sid);
  void FlushLoop();
  // Appends to {sid}.session (fdatasync when `sync`); a failed write is cut off.
  Status AppendToSession(int dirfd, const std::string& sid, std::string_view bytes, bool sync);
  Status SyncSessionFile(int dirfd, const std::string& sid);  // the flusher's, for an append
  // Waits until no save, flush, load or delete of `sid` runs here, then
  // marks one running (Unmark ends it).
  void Mark(const std::string& sid);
  void Unmark(const std::string& sid);
  // The session directory, walked and checked on every access.
  StatusOr<UniqueFd> OpenDirectory(bool create = false) const;
  StatusOr<std::vector<SessionInfo>> ListIn(int dirfd);
  void MaybeReapExpired(int dirfd);  // a sweep, at most once per interval
  void ReapExpired(int dirfd);       // the sweep itself
  bool Expired(double mtime, double now) const { return ttl_days_ > 0 && now - mtime > ttl_days_ * 86400.0; }

  std::string dir_;
  int ttl_days_;
  FileStoreOptions options_;
  std::atomic<double> next_reap_{0};  // this process's next sweep, as Unix time

  // Deferred durability: the flusher's queue and the sessions at work.
  struct FlushJob {
    std::string sid;
    std::pair<dev_t, ino_t> pending;  // the pending file it makes durable
    bool appended = false;  // instead: fdatasync the session file (an append)
  };
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<FlushJob> queue_;
  std::set<std::string> busy_;                  // a save/flush/load/delete runs
  std::map<std::string, std::string> errors_;   // failed flushes, not yet taken
  bool stopping_ = false;
  std::thread flusher_;
};

}  // namespace dolsot
