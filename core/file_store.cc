// FileStore: one file per session, written atomically, in a private directory
// reached by a checked walk from "/"; killed writers' temporary files swept.
#include "core/file_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <set>

#include "core/pending_file.h"
#include "core/session_id.h"

namespace dolsot {
namespace {

constexpr std::string_view kSuffix = ".session";
constexpr std::string_view kTempSuffix = ".tmp";
constexpr std::string_view kLockedTempTag = ".flock-";  // .{sid}.flock-{boot}-{random}.tmp
constexpr size_t kTempRandomDigits = 16;
constexpr int kTempAttempts = 8;
constexpr int kMaxSymlinks = 40;

Status Errno(const std::string& what) {
  int e = errno;
  ErrorCode code = (e == EACCES || e == EPERM || e == ELOOP) ? ErrorCode::kPermission : ErrorCode::kIo;
  return Status(code, what + ": " + std::strerror(e));
}

double NowSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

double MtimeSeconds(const struct stat& st) {
  return static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9;
}

std::string FileName(std::string_view sid) { return std::string(sid) + std::string(kSuffix); }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// ---- The checked walk from "/" to the session directory ----

// Walks to the session directory one component at a time with openat and
// O_NOFOLLOW, checking each directory on the descriptor the next step uses.
class DirectoryWalk {
 public:
  DirectoryWalk(const std::string& dir, bool create) : dir_(dir), create_(create) {}
  StatusOr<UniqueFd> Run();

 private:
  Status Restart();  // back at "/", for the start and absolute symlinks
  Status Step(const std::string& name, bool last);
  Status Enter(UniqueFd fd, const std::string& path, bool last);
  Status FollowSymlink(const std::string& name, bool last);
  Status CheckPassedThrough(const struct stat& st, const std::string& path) const;
  Status CheckSessionDirectory(const struct stat& st) const;
  Status Refuse(const std::string& what) const {
    return Status(ErrorCode::kPermission, "session directory " + dir_ + ": " + what);
  }
  std::string Child(const std::string& name) const { return where_ == "/" ? "/" + name : where_ + "/" + name; }

  const std::string& dir_;
  bool create_;
  std::deque<std::string> pending_;  // components still to walk
  UniqueFd here_;                    // the directory reached so far, checked
  std::string where_;                // its path, symlinks resolved
  int symlinks_ = 0;
};

std::deque<std::string> Components(std::string_view path) {
  std::deque<std::string> out;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view part = path.substr(pos, slash - pos);
    if (!part.empty() && part != ".") out.emplace_back(part);
    pos = slash + 1;
  }
  return out;
}

bool TrustedOwner(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

StatusOr<UniqueFd> DirectoryWalk::Run() {
  pending_ = Components(dir_);
  DOLSOT_RETURN_IF_ERROR(Restart());
  if (pending_.empty()) return Refuse("/ cannot be a session directory");
  while (!pending_.empty()) {
    std::string name = std::move(pending_.front());
    pending_.pop_front();
    DOLSOT_RETURN_IF_ERROR(Step(name, pending_.empty()));
  }
  return std::move(here_);
}

Status DirectoryWalk::Restart() {
  UniqueFd root(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return Errno("cannot open / on the way to session directory " + dir_);
  where_ = "/";
  return Enter(std::move(root), "/", false);
}

Status DirectoryWalk::Step(const std::string& name, bool last) {
  if (name == "..") {  // the physical parent, checked like any other directory
    UniqueFd up(::openat(here_.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!up.valid()) return Errno("cannot open the parent of " + where_);
    size_t slash = where_.rfind('/');
    return Enter(std::move(up), slash == 0 ? "/" : where_.substr(0, slash), last);
  }
  std::string path = Child(name);
  for (bool made = false;; made = true) {
    int fd = ::openat(here_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) return Enter(UniqueFd(fd), path, last);
    if (errno == ELOOP || errno == ENOTDIR) return FollowSymlink(name, last);
    if (errno != ENOENT || !create_ || made) {
      return Errno("cannot open session directory " + dir_ + (path == dir_ ? "" : " (at " + path + ")"));
    }
    // `here_` has passed the check: no one else can have a say in what we make.
    if (::mkdirat(here_.get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
      return Errno("cannot create session directory " + path);
    }
  }
}

Status DirectoryWalk::Enter(UniqueFd fd, const std::string& path, bool last) {
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Errno("cannot inspect " + path);
  DOLSOT_RETURN_IF_ERROR(last ? CheckSessionDirectory(st) : CheckPassedThrough(st, path));
  here_ = std::move(fd);
  where_ = path;
  return Status::Ok();
}

Status DirectoryWalk::FollowSymlink(const std::string& name, bool last) {
  std::string path = Child(name);
  struct stat st;
  if (::fstatat(here_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return Errno("cannot inspect " + path);
  if (!S_ISLNK(st.st_mode)) {
    return last ? Status(ErrorCode::kPermission, "session directory " + dir_ + " is not a directory")
                : Refuse(path + " is not a directory");
  }
  if (last) {
    return Status(ErrorCode::kPermission, "session directory " + dir_ + " is a symlink; refusing to use it");
  }
  // `here_` is checked, so only the link's owner (or root) can replace it.
  if (!TrustedOwner(st.st_uid)) {
    return Refuse(path + " is a symlink owned by uid " + std::to_string(st.st_uid) +
                  ", neither root nor the current user (uid " + std::to_string(::geteuid()) +
                  "), who could point it elsewhere; refusing to follow it");
  }
  if (++symlinks_ > kMaxSymlinks) return Refuse("more than 40 symlinks on the way (a loop?)");
  std::string target(4096, '\0');
  ssize_t n = ::readlinkat(here_.get(), name.c_str(), target.data(), target.size());
  if (n < 0) return Errno("cannot read symlink " + path);
  if (n == 0 || static_cast<size_t>(n) == target.size()) return Refuse("cannot follow symlink " + path);
  target.resize(static_cast<size_t>(n));
  std::deque<std::string> parts = Components(target);
  pending_.insert(pending_.begin(), parts.begin(), parts.end());
  if (target[0] == '/') return Restart();
  return Status::Ok();
}

Status DirectoryWalk::CheckPassedThrough(const struct stat& st, const std::string& path) const {
  if (!S_ISDIR(st.st_mode)) return Refuse(path + " is not a directory");
  if (!TrustedOwner(st.st_uid)) {
    return Refuse(path + " is owned by uid " + std::to_string(st.st_uid) + ", neither root nor the current user (uid " +
                  std::to_string(::geteuid()) + "), who could swap the session directory for their own; " +
                  "refusing to use it (set DOLSOT_CACHE_DIR to a directory of your own)");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return Refuse(path + " is writable by other users (mode " + Octal(st.st_mode) +
                  ", no sticky bit), who could swap the session directory for their own; refusing to use it " +
                  "(chmod go-w " + path + ", or set DOLSOT_CACHE_DIR to a directory of your own)");
  }
  return Status::Ok();
}

Status DirectoryWalk::CheckSessionDirectory(const struct stat& st) const {
  if (!S_ISDIR(st.st_mode)) {
    return Status(ErrorCode::kPermission, "session directory " + dir_ + " is not a directory");
  }
  if (st.st_uid != ::geteuid()) {
    return Status(ErrorCode::kPermission, "session directory " + dir_ + " is owned by uid " +
                                              std::to_string(st.st_uid) + ", not by the current user (uid " +
                                              std::to_string(::geteuid()) + "); refusing to use it");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return Status(ErrorCode::kPermission,
                  "session directory " + dir_ + " is writable by other users; refusing to use it (chmod 700 it)");
  }
  return Status::Ok();
}

// ---- Temporary files: locked by their writer, swept once it is gone ----

// This kernel's boot id as 32 hex digits, or "" where /proc does not say.
const std::string& BootId() {
  static const std::string id = [] {
    std::string out;
    UniqueFd fd(::open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC));
    char buf[64];
    ssize_t n = fd.valid() ? ::read(fd.get(), buf, sizeof buf) : -1;
    for (ssize_t i = 0; i < n; ++i) {
      unsigned char c = static_cast<unsigned char>(buf[i]);
      if (std::isxdigit(c)) out += static_cast<char>(std::tolower(c));
    }
    return out.size() == 32 ? out : std::string();
  }();
  return id;
}

bool IsHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

// .{sid}.flock-{boot}-{random}.tmp, random from the kernel so that a forked
// child never repeats its parent's names (O_EXCL catches any collision).
std::string TempName(std::string_view sid) {
  std::uint64_t bits = 0;
  if (::getrandom(&bits, sizeof bits, 0) != static_cast<ssize_t>(sizeof bits)) {
    static std::atomic<std::uint64_t> counter{0};
    bits = (static_cast<std::uint64_t>(::getpid()) << 32) ^ counter++ ^
           static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  char random[kTempRandomDigits + 1];
  std::snprintf(random, sizeof random, "%016llx", static_cast<unsigned long long>(bits));
  const std::string& boot = BootId();
  return "." + std::string(sid) + std::string(kLockedTempTag) + (boot.empty() ? "unknown" : boot) + "-" +
         random + std::string(kTempSuffix);
}

// Whether `name` is a temporary file whose writer locked it on this kernel,
// so that its lock, or its lack of one, is visible here.
bool LockedOnThisKernel(std::string_view name) {
  const std::string& boot = BootId();
  size_t tag = name.rfind(kLockedTempTag);
  if (boot.empty() || tag == std::string_view::npos || !EndsWith(name, kTempSuffix)) return false;
  std::string_view rest = name.substr(tag + kLockedTempTag.size());
  rest.remove_suffix(kTempSuffix.size());  // {boot}-{random}
  return rest.size() == boot.size() + 1 + kTempRandomDigits && rest.substr(0, boot.size()) == boot &&
         rest[boot.size()] == '-' && IsHex(rest.substr(boot.size() + 1));
}

bool IsTempName(std::string_view name) {
  return name.size() > kTempSuffix.size() && name.front() == '.' && EndsWith(name, kTempSuffix);
}

// Removes the temporary file `name` if no live writer can hold it (see the
// header): unlocked and written, or not written for kStaleTempSeconds.
void SweepTempFile(int dirfd, const char* name, double now) {
  struct stat st;
  if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  bool stale = now - MtimeSeconds(st) > FileStore::kStaleTempSeconds;
  if (!S_ISREG(st.st_mode) || !LockedOnThisKernel(name)) {
    if (stale) ::unlinkat(dirfd, name, 0);
    return;
  }
  UniqueFd fd(::openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) return;
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && stale) ::unlinkat(dirfd, name, 0);  // no flock here: age decides
    return;                                                         // held: its writer lives
  }
  struct stat locked;
  if (::fstat(fd.get(), &locked) != 0) return;
  // A writer locks before its first byte: an empty file may be between the two.
  if (locked.st_size == 0 && now - MtimeSeconds(locked) <= FileStore::kStaleTempSeconds) return;
  // Still under that name? A writer that finished renamed it away, then unlocked.
  struct stat named;
  if (::fstatat(dirfd, name, &named, AT_SYMLINK_NOFOLLOW) != 0 || named.st_dev != locked.st_dev ||
      named.st_ino != locked.st_ino) {
    return;
  }
  ::unlinkat(dirfd, name, 0);  // under our shared lock: no writer can take it now
}

// A temporary file this writer created and holds an exclusive flock on.
struct LockedTemp {
  UniqueFd fd;
  std::string name;
};

StatusOr<LockedTemp> CreateLockedTemp(int dirfd, std::string_view sid, const std::string& dir) {
  for (int attempt = 0; attempt < kTempAttempts; ++attempt) {
    std::string name = TempName(sid);
    UniqueFd fd(::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) {
      if (errno == EEXIST) continue;
      return Errno("cannot create a session file in " + dir);
    }
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      int e = errno;
      ::unlinkat(dirfd, name.c_str(), 0);
      if (e == EWOULDBLOCK || e == EINTR) continue;  // a sweep is looking at it this instant
      errno = e;
      return Errno("cannot lock temporary session file " + dir + "/" + name +
                   " (the session directory's filesystem must support flock)");
    }
    // A sweep removes an empty unlocked file only after kStaleTempSeconds; if
    // this writer stalled that long before locking, start again.
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return Errno("cannot inspect temporary session file in " + dir);
    if (st.st_nlink > 0) return LockedTemp{std::move(fd), std::move(name)};
  }
  return IoError("cannot create a temporary session file in " + dir + " after " + std::to_string(kTempAttempts) +
                 " attempts (other processes keep taking the names)");
}

Status WriteAll(int fd, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write session file");
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// The first `length` bytes of `from` appended to `to`: copied by the kernel
// (copy_file_range: no user-space copy, a reflink where the filesystem has
// them), or through a small buffer where it cannot.
Status CopyFileBytes(int from, int to, std::uint64_t length) {
  loff_t in = 0;
  std::uint64_t done = 0;
  while (done < length) {
    ssize_t n = ::copy_file_range(from, &in, to, nullptr, length - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
      break;  // the buffer below
    }
    if (n < 0) return Errno("cannot copy the pending file");
    if (n == 0) return Status(ErrorCode::kCorrupt, "the pending file is shorter than it was");
    done += static_cast<std::uint64_t>(n);
  }
  std::string buffer;
  while (done < length) {
    if (buffer.empty()) buffer.resize(1 << 20);
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), length - done));
    ssize_t n = ::pread(from, buffer.data(), want, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("cannot read the pending file");
    if (n == 0) return Status(ErrorCode::kCorrupt, "the pending file is shorter than it was");
    DOLSOT_RETURN_IF_ERROR(WriteAll(to, std::string_view(buffer.data(), static_cast<std::size_t>(n))));
    done += static_cast<std::uint64_t>(n);
  }
  return Status::Ok();
}

std::string PendingName(std::string_view sid) { return std::string(sid) + FileStore::kPendingSuffix; }

// A session or pending file, read whole.
struct OwnFile {
  std::string bytes;
  struct stat st;
};

// Reads `name` in `dirfd`: O_NOFOLLOW, a regular file owned by the user, or
// kPermission; nullopt when there is none.
StatusOr<std::optional<OwnFile>> ReadOwnFile(int dirfd, const std::string& name, const std::string& path) {
  UniqueFd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::optional<OwnFile>();
    if (errno == ELOOP) {
      return Status(ErrorCode::kPermission, "session file " + path + " is a symlink; refusing to read it");
    }
    return Errno("cannot open session file " + path);
  }
  OwnFile file;
  if (::fstat(fd.get(), &file.st) != 0) return Errno("cannot inspect session file " + path);
  if (!S_ISREG(file.st.st_mode)) {
    return Status(ErrorCode::kPermission, "session file " + path + " is not a regular file");
  }
  if (file.st.st_uid != ::geteuid()) {
    return Status(ErrorCode::kPermission, "session file " + path + " is owned by another user; refusing to read it");
  }
  std::string& blob = file.bytes;
  blob.resize(static_cast<size_t>(file.st.st_size));
  size_t done = 0;
  while (true) {
    if (done == blob.size()) blob.resize(blob.size() + 65536);
    ssize_t n = ::read(fd.get(), blob.data() + done, blob.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot read session file " + path);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  blob.resize(done);
  return std::optional<OwnFile>(std::move(file));
}

// Unlinks `name` only while it is still the file `id` (not one a later save
// put there).
void UnlinkIfSame(int dirfd, const std::string& name, std::pair<dev_t, ino_t> id) {
  struct stat st;
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == id.first &&
      st.st_ino == id.second) {
    ::unlinkat(dirfd, name.c_str(), 0);
  }
}

}  // namespace

// ---- FileStore ----

StatusOr<std::unique_ptr<FileStore>> FileStore::Open(std::string dir, int ttl_days,
                                                     FileStoreOptions options) {
  if (dir.empty()) return InvalidArgument("session directory path is empty");
  if (dir.find('\0') != std::string::npos) return InvalidArgument("session directory path holds a NUL byte");
  if (ttl_days < 0) return Status(ErrorCode::kConfig, "ttl_days must be >= 0");
  if (dir[0] != '/') {
    std::string cwd(4096, '\0');
    if (::getcwd(cwd.data(), cwd.size()) == nullptr) {
      return Errno("cannot resolve relative session directory " + dir + " (no working directory)");
    }
    cwd.resize(std::strlen(cwd.c_str()));
    dir = (cwd == "/" ? "" : cwd) + "/" + dir;
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const bool deferred = options.defer_durability;
  std::unique_ptr<FileStore> store(new FileStore(dir, ttl_days, std::move(options)));
  auto opened = store->OpenDirectory(/*create=*/true);
  if (!opened.ok()) return opened.status();
  if (deferred) store->flusher_ = std::thread([raw = store.get()] { raw->FlushLoop(); });
  return store;
}

FileStore::~FileStore() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (flusher_.joinable()) flusher_.join();  // it empties the queue first
}

void FileStore::Mark(const std::string& sid) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return busy_.count(sid) == 0; });
  busy_.insert(sid);
}

void FileStore::Unmark(const std::string& sid) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    busy_.erase(sid);
  }
  changed_.notify_all();
}

void FileStore::FlushLoop() {
  for (;;) {
    FlushJob job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to flush
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    if (options_.before_flush) options_.before_flush();
    Status flushed = [&]() -> Status {
      auto dirfd = OpenDirectory();
      if (!dirfd.ok()) return dirfd.status();
      if (job.appended) return SyncSessionFile(dirfd->get(), job.sid);
      DOLSOT_RETURN_IF_ERROR(FlushPending(dirfd->get(), job.sid, job.pending));
      UnlinkIfSame(dirfd->get(), PendingName(job.sid), job.pending);
      return Status::Ok();
    }();
    std::string line;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (flushed.ok()) {
        errors_.erase(job.sid);
      } else if (job.appended) {
        line = "what was appended to the checkpoint of session '" + job.sid +
               "' could not be made durable (" + flushed.message() +
               "); it is in the session file, lost only if the machine goes down before the "
               "file is written back";
        errors_[job.sid] = line;
      } else {
        line = "the checkpoint of session '" + job.sid + "' could not be made durable (" +
               flushed.message() + "); it is kept in " + dir_ + "/" + PendingName(job.sid) +
               " until a later save or load succeeds";
        errors_[job.sid] = line;
      }
    }
    // Logged before the flush counts as done: whoever waits for it (Flush,
    // the session's next save or load) finds the line written too.
    if (!line.empty() && options_.log) options_.log(line);
    {
      std::lock_guard<std::mutex> guard(mutex_);
      busy_.erase(job.sid);
    }
    changed_.notify_all();
  }
}

Status FileStore::SyncSessionFile(int dirfd, const std::string& sid) {
  const std::string path = dir_ + "/" + FileName(sid);
  UniqueFd fd(::openat(dirfd, FileName(sid).c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) return Errno("cannot open session file " + path);
  if (::fdatasync(fd.get()) != 0) return Errno("cannot flush session file " + path);
  return Status::Ok();
}

Status FileStore::Flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return queue_.empty() && busy_.empty(); });
  if (errors_.empty()) return Status::Ok();
  std::string message;
  for (const auto& [sid, line] : errors_) message += (message.empty() ? "" : "; ") + line;
  return IoError(message);
}

Status FileStore::Release(std::string_view sid) {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::string key(sid);
  changed_.wait(lock, [&] { return busy_.count(key) == 0; });
  return Status::Ok();
}

std::optional<std::string> FileStore::TakeFlushError(std::string_view sid) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = errors_.find(std::string(sid));
  if (it == errors_.end()) return std::nullopt;
  std::string line = std::move(it->second);
  errors_.erase(it);
  return line;
}

StatusOr<UniqueFd> FileStore::OpenDirectory(bool create) const { return DirectoryWalk(dir_, create).Run(); }

void FileStore::MaybeReapExpired(int dirfd) {
  double now = NowSeconds();
  if (now < next_reap_.load(std::memory_order_relaxed)) return;
  // Another process sharing the directory may have swept it recently.
  struct stat st;
  if (::fstatat(dirfd, kReapMarker, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
      st.st_uid == ::geteuid()) {
    double last = MtimeSeconds(st);
    if (last <= now && now - last < kReapIntervalSeconds) {
      next_reap_.store(last + kReapIntervalSeconds, std::memory_order_relaxed);
      return;
    }
  }
  // Claim this sweep before scanning, so that concurrent savers don't all scan.
  // A marker that is not ours to touch (a symlink, a directory) only costs a
  // sweep per interval in this process.
  UniqueFd marker(::openat(dirfd, kReapMarker, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600));
  if (marker.valid()) ::futimens(marker.get(), nullptr);
  next_reap_.store(now + kReapIntervalSeconds, std::memory_order_relaxed);
  ReapExpired(dirfd);
}

void FileStore::ReapExpired(int dirfd) {
  // A descriptor of its own: a dup would share (and leave at the end) dirfd's offset.
  int listfd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (listfd < 0) return;
  DIR* d = ::fdopendir(listfd);
  if (d == nullptr) {
    ::close(listfd);
    return;
  }
  double now = NowSeconds();
  while (dirent* e = ::readdir(d)) {
    std::string_view name(e->d_name);
    if (IsTempName(name)) {
      SweepTempFile(dirfd, e->d_name, now);
      continue;
    }
    const std::string_view pending = FileStore::kPendingSuffix;
    const bool session_file = name.size() > kSuffix.size() && EndsWith(name, kSuffix);
    const bool pending_file = name.size() > pending.size() && EndsWith(name, pending);
    if (ttl_days_ <= 0 || !(session_file || pending_file)) continue;
    struct stat st;
    if (::fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (Expired(MtimeSeconds(st), now)) ::unlinkat(dirfd, e->d_name, 0);
  }
  ::closedir(d);
}

StatusOr<std::optional<std::string>> FileStore::TakePending(int dirfd, std::string_view sid) {
  const std::string name = PendingName(sid);
  auto pending = ReadOwnFile(dirfd, name, dir_ + "/" + name);
  if (!pending.ok()) return pending.status();
  if (!pending->has_value()) return std::optional<std::string>();
  const std::pair<dev_t, ino_t> id{(*pending)->st.st_dev, (*pending)->st.st_ino};
  if (Expired(MtimeSeconds((*pending)->st), NowSeconds())) {
    UnlinkIfSame(dirfd, name, id);
    return std::optional<std::string>();
  }
  std::optional<std::string_view> blob = PendingBlob((*pending)->bytes);
  if (!blob) {  // torn by a crash before it was flushed: the session file is the last durable one
    UnlinkIfSame(dirfd, name, id);
    return std::optional<std::string>();
  }
  std::string out(*blob);
  // The flush its writer never did. If it fails, the pending file stays
  // (it is the newest checkpoint) and the next load tries again.
  Status flushed = WriteDurable(dirfd, sid, out);
  if (flushed.ok()) {
    UnlinkIfSame(dirfd, name, id);
  } else if (options_.log) {
    options_.log("session '" + std::string(sid) + "' was restored from " + dir_ + "/" + name +
                 ", which could not be made durable: " + flushed.message());
  }
  return std::optional<std::string>(std::move(out));
}

StatusOr<std::optional<std::string>> FileStore::Load(std::string_view sid) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(sid));
  auto dirfd = OpenDirectory();
  if (!dirfd.ok()) return dirfd.status();
  MaybeReapExpired(dirfd->get());
  const std::string key(sid);
  Mark(key);  // not while a save or a flush of this session runs here
  auto pending = TakePending(dirfd->get(), sid);
  if (!pending.ok() || pending->has_value()) {
    Unmark(key);
    return pending;
  }
  std::string name = FileName(sid);
  std::string path = dir_ + "/" + name;
  auto file = ReadOwnFile(dirfd->get(), name, path);
  Unmark(key);
  if (!file.ok()) return file.status();
  if (!file->has_value()) return std::optional<std::string>();
  if (Expired(MtimeSeconds((*file)->st), NowSeconds())) {  // not written for ttl_days: gone
    ::unlinkat(dirfd->get(), name.c_str(), 0);
    return std::optional<std::string>();
  }
  return std::optional<std::string>(std::move((*file)->bytes));
}

Status FileStore::WriteDurable(int dirfd, std::string_view sid, std::string_view blob) {
  return WriteDurableBy(dirfd, sid, [&](int fd) { return WriteAll(fd, blob); });
}

Status FileStore::FlushPending(int dirfd, const std::string& sid, std::pair<dev_t, ino_t> id) {
  const std::string name = PendingName(sid);
  UniqueFd pending(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  // Gone, or another one: another process's store took it (a load made it
  // the session file), deleted the session or saved a newer one. Either
  // way it is not this flush's to write, and writing it would resurrect or
  // overwrite.
  if (!pending.valid() && errno == ENOENT) return Status::Ok();
  if (!pending.valid()) return Errno("cannot open the pending file " + dir_ + "/" + name);
  struct stat st;
  if (::fstat(pending.get(), &st) != 0) return Errno("cannot inspect " + dir_ + "/" + name);
  if (st.st_dev != id.first || st.st_ino != id.second) return Status::Ok();
  if (!S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) < kPendingTrailerSize) {
    return Status(ErrorCode::kCorrupt, dir_ + "/" + name + " is not a pending file");
  }
  const auto length = static_cast<std::uint64_t>(st.st_size) - kPendingTrailerSize;
  return WriteDurableBy(dirfd, sid, [&](int fd) { return CopyFileBytes(pending.get(), fd, length); });
}

Status FileStore::WriteDurableBy(int dirfd, std::string_view sid,
                                 const std::function<Status(int)>& fill) {
  auto temp = CreateLockedTemp(dirfd, sid, dir_);
  if (!temp.ok()) return temp.status();
  Status written = fill(temp->fd.get());
  if (written.ok() && ::fsync(temp->fd.get()) != 0) written = Errno("cannot flush session file");
  // Renamed while still locked (the lock goes with temp->fd, after the rename):
  // a sweep never finds this name unlocked while it holds our data.
  std::string final_name = FileName(sid);
  if (written.ok() && ::renameat(dirfd, temp->name.c_str(), dirfd, final_name.c_str()) != 0) {
    written = Errno("cannot move session file into place in " + dir_);
  }
  if (!written.ok()) {
    ::unlinkat(dirfd, temp->name.c_str(), 0);
    return written;
  }
  // The rename made durable (EINVAL: a filesystem that cannot sync a directory).
  if (::fsync(dirfd) != 0 && errno != EINVAL) return Errno("cannot flush session directory " + dir_);
  return Status::Ok();
}

Status FileStore::WritePending(int dirfd, std::string_view sid, std::string_view blob,
                               std::pair<dev_t, ino_t>& id) {
  auto temp = CreateLockedTemp(dirfd, sid, dir_);
  if (!temp.ok()) return temp.status();
  Status written = WriteAll(temp->fd.get(), blob);
  if (written.ok()) written = WriteAll(temp->fd.get(), PendingTrailer(blob));
  struct stat st;
  if (written.ok() && ::fstat(temp->fd.get(), &st) != 0) written = Errno("cannot inspect session file");
  const std::string name = PendingName(sid);
  if (written.ok() && ::renameat(dirfd, temp->name.c_str(), dirfd, name.c_str()) != 0) {
    written = Errno("cannot move session file into place in " + dir_);
  }
  if (!written.ok()) {
    ::unlinkat(dirfd, temp->name.c_str(), 0);
    return written;
  }
  id = {st.st_dev, st.st_ino};
  return Status::Ok();
}

Status FileStore::Save(std::string_view sid, std::string_view blob) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(sid));
  auto dirfd = OpenDirectory();
  if (!dirfd.ok()) return dirfd.status();
  MaybeReapExpired(dirfd->get());
  if (!options_.defer_durability) return WriteDurable(dirfd->get(), sid, blob);
  const std::string key(sid);
  Mark(key);  // the previous save of this session is durable (or failed) first
  FlushJob job{key, {}};
  Status written = WritePending(dirfd->get(), sid, blob, job.pending);
  if (!written.ok()) {
    Unmark(key);
    return written;
  }
  {
    std::lock_guard<std::mutex> guard(mutex_);
    queue_.push_back(std::move(job));  // busy until flushed
  }
  changed_.notify_all();
  return Status::Ok();
}

Status FileStore::Append(std::string_view sid, std::string_view bytes) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(sid));
  auto dirfd = OpenDirectory();
  if (!dirfd.ok()) return dirfd.status();
  const std::string key(sid);
  Mark(key);  // not while a save, a flush or a load of this session runs here
  Status appended = AppendToSession(dirfd->get(), key, bytes, /*sync=*/!options_.defer_durability);
  if (!appended.ok() || !options_.defer_durability) {
    Unmark(key);
    return appended;
  }
  // Deferred: the bytes are in the kernel; the flusher makes them durable
  // (busy until then, like a save's pending file).
  {
    std::lock_guard<std::mutex> guard(mutex_);
    queue_.push_back(FlushJob{key, {}, /*appended=*/true});
  }
  changed_.notify_all();
  return Status::Ok();
}

Status FileStore::AppendToSession(int dirfd, const std::string& sid, std::string_view bytes,
                                  bool sync) {
  // A pending file (left by a killed server) is what Load returns: the
  // session file is not the session's newest blob.
  struct stat st;
  if (::fstatat(dirfd, PendingName(sid).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) {
    return Status(ErrorCode::kUnavailable, "session '" + sid + "' has a pending save in " + dir_ +
                                               "; it is saved whole");
  }
  const std::string name = FileName(sid);
  const std::string path = dir_ + "/" + name;
  UniqueFd fd(::openat(dirfd, name.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) {
    if (errno == ENOENT) return Status(ErrorCode::kInvalidSession, "no session file " + path + " to append to");
    if (errno == ELOOP) {
      return Status(ErrorCode::kPermission, "session file " + path + " is a symlink; refusing to write it");
    }
    return Errno("cannot open session file " + path);
  }
  if (::fstat(fd.get(), &st) != 0) return Errno("cannot inspect session file " + path);
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    return Status(ErrorCode::kPermission,
                  "session file " + path + " is not a regular file of the current user; refusing to write it");
  }
  if (Expired(MtimeSeconds(st), NowSeconds())) {  // Load would treat it as gone
    return Status(ErrorCode::kInvalidSession, "session file " + path + " has expired");
  }
  Status written = WriteAll(fd.get(), bytes);
  if (written.ok() && sync && ::fdatasync(fd.get()) != 0) {
    written = Errno("cannot flush session file " + path);
  }
  if (!written.ok()) {
    // Take back what part of it reached the file, so the next append (after
    // a whole save, normally) does not follow a torn frame. Best effort: a
    // reader finds a torn frame all the same.
    if (::ftruncate(fd.get(), st.st_size) != 0) {
      written = Status(written.code(), written.message() + " (and its torn end stays)");
    }
  }
  return written;
}

StatusOr<int> FileStore::Delete(std::string_view sid) {
  DOLSOT_RETURN_IF_ERROR(ValidateResetTarget(sid));
  auto dirfd = OpenDirectory();
  if (!dirfd.ok()) return dirfd.status();
  // Both files of a session; -1 on a failure other than ENOENT.
  auto remove = [&](const std::string& id) -> int {
    int found = 0;
    for (const std::string& name : {PendingName(id), FileName(id)}) {
      if (::unlinkat(dirfd->get(), name.c_str(), 0) == 0) {
        found = 1;
      } else if (errno != ENOENT) {
        return -1;
      }
    }
    return found;
  };
  if (sid != kAllSessions) {
    const std::string key(sid);
    Mark(key);  // a flush in flight would bring the session back
    int found = remove(key);
    const int error = errno;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      errors_.erase(key);
    }
    Unmark(key);
    if (found >= 0) return found;
    errno = error;
    return Errno("cannot delete session " + key + " in " + dir_);
  }
  // Every session: once nothing of this store is at work, and while nothing
  // can start (the lock is held).
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return queue_.empty() && busy_.empty(); });
  errors_.clear();
  auto listed = ListIn(dirfd->get());
  if (!listed.ok()) return listed.status();
  int deleted = 0;
  for (const auto& info : *listed) {
    if (remove(info.id) > 0) ++deleted;
  }
  return deleted;
}

StatusOr<std::vector<SessionInfo>> FileStore::List() {
  auto dirfd = OpenDirectory();
  if (!dirfd.ok()) return dirfd.status();
  return ListIn(dirfd->get());
}

StatusOr<std::vector<SessionInfo>> FileStore::ListIn(int dirfd) {
  ReapExpired(dirfd);  // a listing scans anyway: it never shows an expired session
  int listfd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (listfd < 0) return Errno("cannot list session directory " + dir_);
  DIR* d = ::fdopendir(listfd);
  if (d == nullptr) {
    ::close(listfd);
    return Errno("cannot list session directory " + dir_);
  }
  // A session with a pending file (not flushed yet) is listed as that file
  // says: it is the newer one.
  std::map<std::string, SessionInfo> found;
  std::set<std::string> pending_seen;
  const std::string_view pending_suffix = kPendingSuffix;
  while (dirent* e = ::readdir(d)) {
    std::string_view name(e->d_name);
    const bool pending = name.size() > pending_suffix.size() && EndsWith(name, pending_suffix);
    if (!pending && (name.size() <= kSuffix.size() || !EndsWith(name, kSuffix))) continue;
    std::string sid(name.substr(0, name.size() - (pending ? pending_suffix.size() : kSuffix.size())));
    if (!ValidateSessionId(sid).ok()) continue;
    struct stat st;
    if (::fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
    if (pending) size = size >= kPendingTrailerSize ? size - kPendingTrailerSize : 0;
    if (!pending && pending_seen.count(sid)) continue;
    if (pending) pending_seen.insert(sid);
    found[sid] = {sid, size, MtimeSeconds(st)};
  }
  ::closedir(d);
  std::vector<SessionInfo> out;
  out.reserve(found.size());
  for (auto& [sid, info] : found) out.push_back(std::move(info));
  return out;
}

}  // namespace dolsot
