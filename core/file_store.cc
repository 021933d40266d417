// FileStore: one file per session, written atomically, in a private directory.
#include "core/file_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include "core/session_id.h"

namespace dolsot {
namespace {

constexpr std::string_view kSuffix = ".session";
constexpr double kStaleTempSeconds = 3600;  // a killed writer's leftover

// Closes a file descriptor on every exit path.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_;
};

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

// Creates `path` and missing parents with mode 0700.
Status MakeDirectories(const std::string& path) {
  if (path.empty()) return InvalidArgument("session directory path is empty");
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      return Errno("cannot create session directory " + partial);
    }
  }
  return Status::Ok();
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

std::string TempName(std::string_view sid) {
  static std::atomic<unsigned> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return "." + std::string(sid) + "." + std::to_string(::getpid()) + "." +
         std::to_string(counter++) + "." + std::to_string(rng() % 1000000007) + ".tmp";
}

}  // namespace

StatusOr<std::unique_ptr<FileStore>> FileStore::Open(std::string dir, int ttl_days) {
  if (dir.empty()) return InvalidArgument("session directory path is empty");
  if (dir.find('\0') != std::string::npos) return InvalidArgument("session directory path holds a NUL byte");
  if (ttl_days < 0) return Status(ErrorCode::kConfig, "ttl_days must be >= 0");
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return Errno("cannot inspect session directory " + dir);
    DOLSOT_RETURN_IF_ERROR(MakeDirectories(dir));
  }
  std::unique_ptr<FileStore> store(new FileStore(dir, ttl_days));
  DOLSOT_RETURN_IF_ERROR(store->CheckDirectory());
  return store;
}

Status FileStore::CheckDirectory() const {
  struct stat st;
  if (::lstat(dir_.c_str(), &st) != 0) return Errno("cannot inspect session directory " + dir_);
  if (S_ISLNK(st.st_mode)) {
    return Status(ErrorCode::kPermission,
                  "session directory " + dir_ + " is a symlink; refusing to use it");
  }
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

void FileStore::MaybeReapExpired() {
  double now = NowSeconds();
  if (now < next_reap_.load(std::memory_order_relaxed)) return;
  Fd dirfd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dirfd.valid()) return;
  // Another process sharing the directory may have swept it recently.
  struct stat st;
  if (::fstatat(dirfd.get(), kReapMarker, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
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
  Fd marker(::openat(dirfd.get(), kReapMarker, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600));
  if (marker.valid()) ::futimens(marker.get(), nullptr);
  next_reap_.store(now + kReapIntervalSeconds, std::memory_order_relaxed);
  ReapExpired(dirfd.get());
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
    bool temp = name.size() > 4 && name.front() == '.' && name.substr(name.size() - 4) == ".tmp";
    bool session = name.size() > kSuffix.size() && name.substr(name.size() - kSuffix.size()) == kSuffix;
    if (!temp && !(session && ttl_days_ > 0)) continue;
    struct stat st;
    if (::fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    double age = now - MtimeSeconds(st);
    if ((temp && age > kStaleTempSeconds) || (session && Expired(MtimeSeconds(st), now))) {
      ::unlinkat(dirfd, e->d_name, 0);
    }
  }
  ::closedir(d);
}

StatusOr<std::optional<std::string>> FileStore::Load(std::string_view sid) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(sid));
  DOLSOT_RETURN_IF_ERROR(CheckDirectory());
  MaybeReapExpired();
  std::string path = dir_ + "/" + FileName(sid);
  Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::optional<std::string>();
    if (errno == ELOOP) {
      return Status(ErrorCode::kPermission, "session file " + path + " is a symlink; refusing to read it");
    }
    return Errno("cannot open session file " + path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Errno("cannot inspect session file " + path);
  if (!S_ISREG(st.st_mode)) {
    return Status(ErrorCode::kPermission, "session file " + path + " is not a regular file");
  }
  if (st.st_uid != ::geteuid()) {
    return Status(ErrorCode::kPermission, "session file " + path + " is owned by another user; refusing to read it");
  }
  if (Expired(MtimeSeconds(st), NowSeconds())) {  // not written for ttl_days: gone
    ::unlink(path.c_str());
    return std::optional<std::string>();
  }
  std::string blob;
  blob.resize(static_cast<size_t>(st.st_size));
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
  return std::optional<std::string>(std::move(blob));
}

Status FileStore::Save(std::string_view sid, std::string_view blob) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(sid));
  DOLSOT_RETURN_IF_ERROR(CheckDirectory());
  MaybeReapExpired();
  Fd dirfd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dirfd.valid()) return Errno("cannot open session directory " + dir_);
  std::string temp = TempName(sid);
  {
    Fd fd(::openat(dirfd.get(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return Errno("cannot create a session file in " + dir_);
    Status written = WriteAll(fd.get(), blob);
    if (written.ok() && ::fsync(fd.get()) != 0) written = Errno("cannot flush session file");
    if (!written.ok()) {
      ::unlinkat(dirfd.get(), temp.c_str(), 0);
      return written;
    }
  }
  std::string final_name = FileName(sid);
  if (::renameat(dirfd.get(), temp.c_str(), dirfd.get(), final_name.c_str()) != 0) {
    Status s = Errno("cannot move session file into place in " + dir_);
    ::unlinkat(dirfd.get(), temp.c_str(), 0);
    return s;
  }
  ::fsync(dirfd.get());  // make the rename durable
  return Status::Ok();
}

StatusOr<int> FileStore::Delete(std::string_view sid) {
  DOLSOT_RETURN_IF_ERROR(ValidateResetTarget(sid));
  DOLSOT_RETURN_IF_ERROR(CheckDirectory());
  if (sid != kAllSessions) {
    std::string path = dir_ + "/" + FileName(sid);
    if (::unlink(path.c_str()) == 0) return 1;
    if (errno == ENOENT) return 0;
    return Errno("cannot delete session file " + path);
  }
  auto listed = List();
  if (!listed.ok()) return listed.status();
  int deleted = 0;
  for (const auto& info : *listed) {
    std::string path = dir_ + "/" + FileName(info.id);
    if (::unlink(path.c_str()) == 0) ++deleted;
  }
  return deleted;
}

StatusOr<std::vector<SessionInfo>> FileStore::List() {
  DOLSOT_RETURN_IF_ERROR(CheckDirectory());
  Fd dirfd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dirfd.valid()) return Errno("cannot open session directory " + dir_);
  ReapExpired(dirfd.get());  // a listing scans anyway: it never shows an expired session
  int listfd = ::dup(dirfd.get());
  if (listfd < 0) return Errno("cannot list session directory " + dir_);
  DIR* d = ::fdopendir(listfd);
  if (d == nullptr) {
    ::close(listfd);
    return Errno("cannot list session directory " + dir_);
  }
  std::vector<SessionInfo> out;
  while (dirent* e = ::readdir(d)) {
    std::string_view name(e->d_name);
    if (name.size() <= kSuffix.size() || name.substr(name.size() - kSuffix.size()) != kSuffix) continue;
    std::string_view sid = name.substr(0, name.size() - kSuffix.size());
    if (!ValidateSessionId(sid).ok()) continue;
    struct stat st;
    if (::fstatat(dirfd.get(), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back({std::string(sid), static_cast<std::uint64_t>(st.st_size), MtimeSeconds(st)});
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const SessionInfo& a, const SessionInfo& b) { return a.id < b.id; });
  return out;
}

}  // namespace dolsot
