// FileStore: the security properties (symlink, foreign owner, mode, the
// directories above), atomic writes under a writer killed mid-save, the sweep
// of killed writers' temporary files, TTL reaping, and concurrent writers.
#include "core/file_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/pending_file.h"

namespace dolsot {
namespace {

namespace fs = std::filesystem;

class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dolsot-fstest-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }

  std::unique_ptr<FileStore> OpenStore(const std::string& sub = "sessions", int ttl = 7) {
    auto s = FileStore::Open(root_ + "/" + sub, ttl);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }

  std::string root_;
};

// A blob whose every byte depends on a version number, so a torn file is
// detectable: all bytes equal.
std::string Blob(char version, size_t size) { return std::string(size, version); }

bool IsWholeBlob(const std::string& blob, size_t size) {
  if (blob.size() != size) return false;
  for (char c : blob) {
    if (c != blob[0]) return false;
  }
  return true;
}

TEST_F(FileStoreTest, CreatesPrivateDirectoryAndFiles) {
  auto store = OpenStore("a/b/sessions");
  ASSERT_TRUE(store);
  struct stat st;
  ASSERT_EQ(::stat((root_ + "/a/b/sessions").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_TRUE(store->Save("s1", "data").ok());
  ASSERT_EQ(::stat((root_ + "/a/b/sessions/s1.session").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(FileStoreTest, RoundTripsBinaryBlobsAndLists) {
  auto store = OpenStore();
  std::string blob("\0\x01\xff\n", 4);
  ASSERT_TRUE(store->Save("s1", blob).ok());
  ASSERT_TRUE(store->Save("s2", "").ok());
  auto loaded = store->Load("s1");
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ(**loaded, blob);
  EXPECT_FALSE(store->Load("nope")->has_value());
  auto listed = store->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].id, "s1");
  EXPECT_EQ((*listed)[0].size_bytes, 4u);
  EXPECT_EQ(*store->Delete("s1"), 1);
  EXPECT_EQ(*store->Delete("all"), 1);
  EXPECT_TRUE(store->List()->empty());
}

TEST_F(FileStoreTest, RefusesSymlinkedDirectory) {
  fs::create_directory(root_ + "/real");
  fs::permissions(root_ + "/real", fs::perms::owner_all);
  fs::create_directory_symlink(root_ + "/real", root_ + "/link");
  auto s = FileStore::Open(root_ + "/link", 7);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kPermission);
  EXPECT_NE(s.status().message().find("symlink"), std::string::npos);
}

TEST_F(FileStoreTest, RefusesDirectorySwappedForSymlinkLater) {
  auto store = OpenStore("dir");
  ASSERT_TRUE(store);
  fs::rename(root_ + "/dir", root_ + "/moved");
  fs::create_directory_symlink(root_ + "/moved", root_ + "/dir");
  EXPECT_EQ(store->Save("s", "x").code(), ErrorCode::kPermission);
  EXPECT_EQ(store->Load("s").status().code(), ErrorCode::kPermission);
}

TEST_F(FileStoreTest, RefusesForeignOwner) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown a directory to another user";
  fs::create_directory(root_ + "/foreign");
  ASSERT_EQ(::chmod((root_ + "/foreign").c_str(), 0700), 0);
  ASSERT_EQ(::chown((root_ + "/foreign").c_str(), 65534, 65534), 0);
  auto s = FileStore::Open(root_ + "/foreign", 7);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kPermission);
  EXPECT_NE(s.status().message().find("owned by uid 65534"), std::string::npos);
}

TEST_F(FileStoreTest, RefusesForeignOwnedSessionFile) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown a file to another user";
  auto store = OpenStore();
  ASSERT_TRUE(store->Save("s", "mine").ok());
  ASSERT_EQ(::chown((root_ + "/sessions/s.session").c_str(), 65534, 65534), 0);
  EXPECT_EQ(store->Load("s").status().code(), ErrorCode::kPermission);
}

TEST_F(FileStoreTest, RefusesGroupOrWorldWritableDirectory) {
  fs::create_directory(root_ + "/open");
  ASSERT_EQ(::chmod((root_ + "/open").c_str(), 0777), 0);
  auto s = FileStore::Open(root_ + "/open", 7);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kPermission);
}

TEST_F(FileStoreTest, RefusesSymlinkedSessionFile) {
  auto store = OpenStore();
  std::string secret = root_ + "/secret";
  { FILE* f = std::fopen(secret.c_str(), "w"); std::fputs("secret", f); std::fclose(f); }
  fs::create_symlink(secret, root_ + "/sessions/evil.session");
  auto r = store->Load("evil");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kPermission);
  // A save replaces the link itself (rename), never writes through it.
  ASSERT_TRUE(store->Save("evil", "new").ok());
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(root_ + "/sessions/evil.session")));
  EXPECT_EQ(**store->Load("evil"), "new");
  FILE* f = std::fopen(secret.c_str(), "r");
  char buf[16] = {};
  ASSERT_EQ(std::fread(buf, 1, sizeof buf, f), 6u);
  std::fclose(f);
  EXPECT_STREQ(buf, "secret");
}

TEST_F(FileStoreTest, WriterKilledMidSaveLeavesOldOrNewNeverTorn) {
  auto store = OpenStore();
  const size_t kSize = 4 << 20;
  ASSERT_TRUE(store->Save("s", Blob('a', kSize)).ok());
  for (int round = 0; round < 20; ++round) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(ready[0]);
      auto child = FileStore::Open(root_ + "/sessions", 7);
      char v = static_cast<char>('b' + round % 20);
      if (::write(ready[1], "r", 1) != 1) ::_exit(3);
      for (;;) (void)(*child)->Save("s", Blob(v, kSize));
    }
    ::close(ready[1]);
    char c;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);  // the writer is writing
    ::close(ready[0]);
    // Let it get some way into a write: wait until a temp file exists.
    for (int spin = 0; spin < 100000; ++spin) {
      bool temp = false;
      for (auto& e : fs::directory_iterator(root_ + "/sessions")) {
        if (e.path().extension() == ".tmp") temp = true;
      }
      if (temp) break;
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    auto loaded = store->Load("s");
    ASSERT_TRUE(loaded.ok() && loaded->has_value());
    EXPECT_TRUE(IsWholeBlob(**loaded, kSize)) << "torn session file in round " << round;
  }
}

TEST_F(FileStoreTest, ConcurrentWritersFromSeveralProcesses) {
  auto store = OpenStore();
  const int kWriters = 4;
  const size_t kSize = 256 << 10;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto child = FileStore::Open(root_ + "/sessions", 7);
      if (!child.ok()) ::_exit(2);
      for (int i = 0; i < 30; ++i) {
        if (!(*child)->Save("shared", Blob(static_cast<char>('a' + w), kSize)).ok()) ::_exit(3);
        if (!(*child)->Save("own" + std::to_string(w), Blob('z', kSize)).ok()) ::_exit(4);
        auto r = (*child)->Load("shared");
        if (!r.ok() || !r->has_value() || !IsWholeBlob(**r, kSize)) ::_exit(5);
      }
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer status " << status;
  }
  EXPECT_TRUE(IsWholeBlob(**store->Load("shared"), kSize));
  EXPECT_EQ(store->List()->size(), static_cast<size_t>(kWriters + 1));
  for (auto& e : fs::directory_iterator(root_ + "/sessions")) {
    EXPECT_NE(e.path().extension(), ".tmp") << "leftover temp file " << e.path();
  }
}

void SetAgeDays(const std::string& path, double days) {
  struct timespec times[2];
  ::clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= static_cast<time_t>(days * 86400);
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST_F(FileStoreTest, ReapsSessionsNotWrittenForTtlDays) {
  auto store = OpenStore("sessions", 7);
  ASSERT_TRUE(store->Save("old", "x").ok());
  ASSERT_TRUE(store->Save("fresh", "y").ok());
  SetAgeDays(root_ + "/sessions/old.session", 8);
  SetAgeDays(root_ + "/sessions/fresh.session", 6);
  auto listed = store->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id, "fresh");
  EXPECT_FALSE(fs::exists(root_ + "/sessions/old.session"));
}

TEST_F(FileStoreTest, TtlZeroNeverReaps) {
  auto store = OpenStore("sessions", 0);
  ASSERT_TRUE(store->Save("ancient", "x").ok());
  SetAgeDays(root_ + "/sessions/ancient.session", 3650);
  EXPECT_TRUE(store->Load("ancient")->has_value());
}

TEST_F(FileStoreTest, ReapsTempFilesLeftByKilledWriters) {
  auto store = OpenStore();
  std::string temp = root_ + "/sessions/.s.123.0.42.tmp";
  { FILE* f = std::fopen(temp.c_str(), "w"); std::fputs("partial", f); std::fclose(f); }
  SetAgeDays(temp, 1);
  ASSERT_TRUE(store->List().ok());
  EXPECT_FALSE(fs::exists(temp));
}

TEST_F(FileStoreTest, LoadTreatsAnExpiredSessionAsAbsentAndDeletesIt) {
  auto store = OpenStore("sessions", 7);
  ASSERT_TRUE(store->Save("old", "x").ok());  // also sweeps: the next sweep is not due
  SetAgeDays(root_ + "/sessions/old.session", 8);
  auto loaded = store->Load("old");
  ASSERT_TRUE(loaded.ok());
  EXPECT_FALSE(loaded->has_value());
  EXPECT_FALSE(fs::exists(root_ + "/sessions/old.session"));
}

TEST_F(FileStoreTest, SavesSweepTheDirectoryOncePerIntervalAcrossProcesses) {
  auto store = OpenStore("sessions", 7);
  ASSERT_TRUE(store->Save("old", "x").ok());
  std::string marker = root_ + "/sessions/" + FileStore::kReapMarker;
  ASSERT_TRUE(fs::is_regular_file(marker)) << "the first save records its sweep";
  SetAgeDays(root_ + "/sessions/old.session", 8);
  // Within the interval, saving another session does not scan the directory.
  ASSERT_TRUE(store->Save("other", "y").ok());
  EXPECT_TRUE(fs::exists(root_ + "/sessions/old.session"));
  // Another process (a new store) sees the marker and does not sweep either.
  auto second = OpenStore("sessions", 7);
  ASSERT_TRUE(second->Save("third", "z").ok());
  EXPECT_TRUE(fs::exists(root_ + "/sessions/old.session"));
  // Once the marker is older than the interval, the next process to save sweeps.
  SetAgeDays(marker, 1);
  auto third = OpenStore("sessions", 7);
  ASSERT_TRUE(third->Save("fourth", "w").ok());
  EXPECT_FALSE(fs::exists(root_ + "/sessions/old.session"));
  EXPECT_TRUE(fs::exists(root_ + "/sessions/other.session"));
  // A listing never shows an expired session, whatever the marker says.
  ASSERT_TRUE(third->Save("stale", "v").ok());
  SetAgeDays(root_ + "/sessions/stale.session", 9);
  auto listed = third->List();
  ASSERT_TRUE(listed.ok());
  for (const auto& info : *listed) EXPECT_NE(info.id, "stale");
  EXPECT_EQ(listed->size(), 3u);  // other, third and fourth
}

TEST_F(FileStoreTest, DoesNotFollowASymlinkedSweepMarker) {
  auto store = OpenStore("sessions", 7);
  std::string target = root_ + "/elsewhere";
  ASSERT_EQ(::symlink(target.c_str(), (root_ + "/sessions/" + FileStore::kReapMarker).c_str()), 0);
  ASSERT_TRUE(store->Save("s", "x").ok());
  EXPECT_FALSE(fs::exists(target)) << "the marker symlink was followed";
  EXPECT_EQ(**store->Load("s"), "x");
}

TEST_F(FileStoreTest, IgnoresForeignFilesInTheDirectory) {
  auto store = OpenStore();
  { FILE* f = std::fopen((root_ + "/sessions/notes.txt").c_str(), "w"); std::fclose(f); }
  fs::create_directory(root_ + "/sessions/sub.session");
  ASSERT_TRUE(store->Save("s", "x").ok());
  auto listed = store->List();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(*store->Delete("all"), 1);
  EXPECT_TRUE(fs::exists(root_ + "/sessions/notes.txt"));
}

TEST_F(FileStoreTest, RefusesBadSessionIds) {
  auto store = OpenStore();
  EXPECT_EQ(store->Save("../escape", "x").code(), ErrorCode::kInvalidSession);
  EXPECT_EQ(store->Load(std::string("a\0b", 3)).status().code(), ErrorCode::kInvalidSession);
  EXPECT_EQ(store->Delete("a/b").status().code(), ErrorCode::kInvalidSession);
  EXPECT_FALSE(fs::exists(root_ + "/escape.session"));
}

// ---- Temporary files of writers that died mid-save ----

std::vector<std::string> TempFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".tmp") out.push_back(e.path().string());
  }
  return out;
}

// A child process stopped inside FileStore::Save, mid-write. RLIMIT_FSIZE
// makes its write past kStopAt bytes raise SIGXFSZ, whose handler tells the
// parent and then blocks on a pipe nobody writes: the child holds its
// temporary file exactly as a live writer does until it is killed.
int g_told_fd = -1;
int g_wait_fd = -1;
void StopInsideWrite(int) {
  char c = 'w';
  if (::write(g_told_fd, &c, 1) != 1) ::_exit(6);
  (void)!::read(g_wait_fd, &c, 1);  // blocks: the parent never writes
  ::_exit(7);
}

class StoppedWriter {
 public:
  static constexpr off_t kStopAt = 1 << 20;
  StoppedWriter() = default;
  StoppedWriter(const StoppedWriter&) = delete;
  StoppedWriter& operator=(const StoppedWriter&) = delete;
  ~StoppedWriter() { Kill(); }

  // Forks the writer; true once it is stopped mid-write.
  bool Start(const std::string& dir) {
    int told[2], hold[2];
    if (::pipe(told) != 0) return false;
    if (::pipe(hold) != 0) return false;
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) RunChild(dir, told, hold);
    ::close(told[1]);
    ::close(hold[0]);
    told_ = told[0];
    hold_ = hold[1];
    char c;
    return ::read(told_, &c, 1) == 1;
  }

  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    if (told_ >= 0) ::close(std::exchange(told_, -1));
    if (hold_ >= 0) ::close(std::exchange(hold_, -1));
  }

 private:
  [[noreturn]] static void RunChild(const std::string& dir, int told[2], int hold[2]) {
    ::close(told[0]);
    ::close(hold[1]);
    g_told_fd = told[1];
    g_wait_fd = hold[0];
    struct sigaction sa = {};
    sa.sa_handler = StopInsideWrite;
    ::sigemptyset(&sa.sa_mask);
    if (::sigaction(SIGXFSZ, &sa, nullptr) != 0) ::_exit(2);
    auto store = FileStore::Open(dir, 7);
    if (!store.ok()) ::_exit(3);
    struct rlimit lim;
    if (::getrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(4);
    lim.rlim_cur = kStopAt;
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(4);
    (void)(*store)->Save("big", std::string(4 * kStopAt, 'x'));
    ::_exit(5);  // not reached: the write stops in StopInsideWrite
  }

  pid_t pid_ = -1;
  int told_ = -1;
  int hold_ = -1;
};

// The path of the temporary file a writer killed mid-save left in `dir`.
std::string TempOfKilledWriter(const std::string& dir) {
  StoppedWriter writer;
  EXPECT_TRUE(writer.Start(dir));
  writer.Kill();
  auto temps = TempFiles(dir);
  EXPECT_EQ(temps.size(), 1u);
  return temps.empty() ? std::string() : temps[0];
}

TEST_F(FileStoreTest, SweepsTheTempFileOfAWriterKilledMidSave) {
  auto store = OpenStore();
  StoppedWriter writer;
  ASSERT_TRUE(writer.Start(root_ + "/sessions"));
  auto temps = TempFiles(root_ + "/sessions");
  ASSERT_EQ(temps.size(), 1u);
  EXPECT_EQ(fs::file_size(temps[0]), static_cast<std::uintmax_t>(StoppedWriter::kStopAt));
  ASSERT_TRUE(store->List().ok());
  EXPECT_TRUE(fs::exists(temps[0])) << "the sweep removed a live writer's temporary file";
  writer.Kill();
  ASSERT_TRUE(store->List().ok());
  EXPECT_FALSE(fs::exists(temps[0])) << "a killed writer's temporary file outlived the sweep";
  EXPECT_FALSE(store->Load("big")->has_value());
}

TEST_F(FileStoreTest, SavesSweepKilledWritersTempFilesOncePerInterval) {
  auto store = OpenStore();
  std::string temp = TempOfKilledWriter(root_ + "/sessions");
  ASSERT_FALSE(temp.empty());
  // The killed writer's own save recorded a sweep: within the interval, none.
  auto second = OpenStore();
  ASSERT_TRUE(second->Save("s", "x").ok());
  EXPECT_TRUE(fs::exists(temp));
  SetAgeDays(root_ + "/sessions/" + FileStore::kReapMarker, 1);
  auto third = OpenStore();
  ASSERT_TRUE(third->Save("s", "y").ok());
  EXPECT_FALSE(fs::exists(temp));
}

TEST_F(FileStoreTest, SweepsNeverRemoveALiveWritersTempFile) {
  // Writers save while another process lists (and so sweeps) without pause:
  // every save must land, whichever instant of it a sweep sees.
  auto store = OpenStore();
  std::vector<pid_t> pids;
  for (int w = 0; w < 3; ++w) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto child = FileStore::Open(root_ + "/sessions", 7);
      if (!child.ok()) ::_exit(2);
      for (int i = 0; i < 300; ++i) {
        size_t size = (i % 3 == 0) ? 0 : 4096u << (i % 5);  // empty blobs too
        if (!(*child)->Save("w" + std::to_string(w), Blob('a', size)).ok()) ::_exit(3);
      }
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  pid_t lister = ::fork();
  ASSERT_GE(lister, 0);
  if (lister == 0) {
    auto child = FileStore::Open(root_ + "/sessions", 7);
    if (!child.ok()) ::_exit(2);
    for (;;) (void)(*child)->List();
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a save failed: writer status " << status;
  }
  ::kill(lister, SIGKILL);
  ::waitpid(lister, nullptr, 0);
  EXPECT_EQ(store->List()->size(), 3u);
}

TEST_F(FileStoreTest, KeepsATempFileWhoseLockIsHeld) {
  auto store = OpenStore();
  std::string temp = TempOfKilledWriter(root_ + "/sessions");
  ASSERT_FALSE(temp.empty());
  // Another writer's lock (another open file description, as a process has).
  int fd = ::open(temp.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  ASSERT_TRUE(store->List().ok());
  EXPECT_TRUE(fs::exists(temp)) << "removed a temporary file whose writer holds its lock";
  ::close(fd);
  ASSERT_TRUE(store->List().ok());
  EXPECT_FALSE(fs::exists(temp));
}

TEST_F(FileStoreTest, KeepsAnEmptyUnlockedTempFileUntilItIsOld) {
  // Between creating its temporary file and locking it, a writer's file is
  // empty and unlocked: the sweep leaves such a file for kStaleTempSeconds.
  auto store = OpenStore();
  std::string temp = TempOfKilledWriter(root_ + "/sessions");
  ASSERT_FALSE(temp.empty());
  ASSERT_EQ(::truncate(temp.c_str(), 0), 0);
  ASSERT_TRUE(store->List().ok());
  EXPECT_TRUE(fs::exists(temp));
  SetAgeDays(temp, 1);
  ASSERT_TRUE(store->List().ok());
  EXPECT_FALSE(fs::exists(temp));
}

TEST_F(FileStoreTest, TempFilesOfAnotherKernelKeepTheAgeRule) {
  // A writer on another host sharing the directory (or before a reboot):
  // its lock is not necessarily visible here, so only age counts.
  auto store = OpenStore();
  std::string temp = TempOfKilledWriter(root_ + "/sessions");
  ASSERT_FALSE(temp.empty());
  size_t tag = temp.rfind(".flock-");
  ASSERT_NE(tag, std::string::npos) << temp;
  size_t boot = tag + std::string(".flock-").size();
  size_t end = temp.find('-', boot);
  ASSERT_NE(end, std::string::npos) << temp;
  std::string foreign = temp.substr(0, boot) + std::string(end - boot, '0') + temp.substr(end);
  ASSERT_EQ(::rename(temp.c_str(), foreign.c_str()), 0);
  ASSERT_TRUE(store->List().ok());
  EXPECT_TRUE(fs::exists(foreign));
  SetAgeDays(foreign, 1);
  ASSERT_TRUE(store->List().ok());
  EXPECT_FALSE(fs::exists(foreign));
}

TEST_F(FileStoreTest, KeepsAYoungTempFileOfTheOldNamingScheme) {
  auto store = OpenStore();
  std::string temp = root_ + "/sessions/.s.123.0.42.tmp";
  { FILE* f = std::fopen(temp.c_str(), "w"); std::fputs("partial", f); std::fclose(f); }
  ASSERT_TRUE(store->List().ok());
  EXPECT_TRUE(fs::exists(temp)) << "its writer (an older dolsot) may still be writing";
}

// ---- The directories above the session directory ----

std::string OpenError(const std::string& dir) {
  auto s = FileStore::Open(dir, 7);
  if (s.ok()) return "opened";
  EXPECT_EQ(s.status().code(), ErrorCode::kPermission) << s.status().ToString();
  return s.status().message();
}

TEST_F(FileStoreTest, RefusesAParentWritableByOthers) {
  std::string parent = root_ + "/shared";
  fs::create_directory(parent);
  ASSERT_EQ(::chmod(parent.c_str(), 0777), 0);
  std::string message = OpenError(parent + "/sessions");
  EXPECT_NE(message.find(parent + " is writable by other users"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(parent + "/sessions")) << "created a directory inside an unsafe parent";
}

TEST_F(FileStoreTest, RefusesAnyAncestorWritableByOthers) {
  fs::create_directories(root_ + "/a/b");
  ASSERT_EQ(::chmod((root_ + "/a").c_str(), 0775), 0);
  std::string message = OpenError(root_ + "/a/b/sessions");
  EXPECT_NE(message.find(root_ + "/a is writable by other users"), std::string::npos) << message;
}

TEST_F(FileStoreTest, RefusesAParentMadeWritableAfterOpening) {
  auto store = OpenStore("p/sessions");
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Save("s", "x").ok());
  ASSERT_EQ(::chmod((root_ + "/p").c_str(), 0777), 0);
  EXPECT_EQ(store->Save("s", "y").code(), ErrorCode::kPermission);
  EXPECT_EQ(store->Load("s").status().code(), ErrorCode::kPermission);
  EXPECT_EQ(store->List().status().code(), ErrorCode::kPermission);
  EXPECT_EQ(store->Delete("s").status().code(), ErrorCode::kPermission);
}

TEST_F(FileStoreTest, RefusesAParentOwnedByAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown a directory to another user";
  std::string parent = root_ + "/theirs";
  fs::create_directory(parent);
  ASSERT_EQ(::chmod(parent.c_str(), 0755), 0);
  ASSERT_EQ(::chown(parent.c_str(), 65534, 65534), 0);
  std::string message = OpenError(parent + "/sessions");
  EXPECT_NE(message.find(parent + " is owned by uid 65534"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(parent + "/sessions"));
}

// TMPDIR=root_, made like /tmp (root's or ours, sticky, world-writable).
EnvLookup TmpdirEnv(const std::string& tmpdir) {
  return [tmpdir](const char* name) -> std::optional<std::string> {
    if (std::string(name) == "TMPDIR") return tmpdir;
    return std::nullopt;
  };
}

TEST_F(FileStoreTest, DefaultLayoutRefusesAParentPreCreatedOpenToOthers) {
  ASSERT_EQ(::chmod(root_.c_str(), 01777), 0);
  std::string dir = DefaultCacheDir(TmpdirEnv(root_));
  std::string parent = root_ + "/dolsot-" + std::to_string(::getuid());
  ASSERT_EQ(dir, parent + "/sessions");
  // Another user got there first: dolsot-{uid} world-writable (or theirs).
  ASSERT_EQ(::mkdir(parent.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(parent.c_str(), 0777), 0);
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(parent.c_str(), 65534, 65534), 0);
  }
  std::string message = OpenError(dir);
  EXPECT_NE(message.find(parent), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(dir));
  // Once it is the user's own and private, the default layout is accepted.
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(parent.c_str(), 0, 0), 0);
  }
  ASSERT_EQ(::chmod(parent.c_str(), 0700), 0);
  EXPECT_EQ(OpenError(dir), "opened");
}

TEST_F(FileStoreTest, DefaultLayoutRefusesAParentThatIsAnotherUsersSymlink) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a symlink owned by another user";
  ASSERT_EQ(::chmod(root_.c_str(), 01777), 0);
  std::string bait = root_ + "/bait";
  ASSERT_EQ(::mkdir(bait.c_str(), 0700), 0);  // private and ours: only the link is theirs
  std::string parent = root_ + "/dolsot-" + std::to_string(::getuid());
  ASSERT_EQ(::symlink(bait.c_str(), parent.c_str()), 0);
  ASSERT_EQ(::lchown(parent.c_str(), 65534, 65534), 0);
  std::string message = OpenError(DefaultCacheDir(TmpdirEnv(root_)));
  EXPECT_NE(message.find(parent + " is a symlink owned by uid 65534"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(bait + "/sessions"));
}

TEST_F(FileStoreTest, AcceptsAStickyAncestorAndTheUsersOwnSymlinkAbove) {
  // /tmp-like (sticky) and a symlinked home (/home -> var/home) are fine.
  fs::create_directories(root_ + "/tmp");
  ASSERT_EQ(::chmod((root_ + "/tmp").c_str(), 01777), 0);
  fs::create_directories(root_ + "/var/home");
  fs::create_directory_symlink("var/home", root_ + "/home");
  auto a = FileStore::Open(root_ + "/tmp/dolsot/sessions", 7);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = FileStore::Open(root_ + "/home/me/../me/sessions", 7);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE((*b)->Save("s", "x").ok());
  EXPECT_TRUE(fs::exists(root_ + "/var/home/me/sessions/s.session"));
}

TEST_F(FileStoreTest, RefusesAStickyAncestorOwnedByAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown a directory to another user";
  std::string tmp = root_ + "/tmp";
  fs::create_directory(tmp);
  ASSERT_EQ(::chmod(tmp.c_str(), 01777), 0);
  ASSERT_EQ(::chown(tmp.c_str(), 65534, 65534), 0);  // its owner may rename anything in it
  std::string message = OpenError(tmp + "/dolsot/sessions");
  EXPECT_NE(message.find(tmp + " is owned by uid 65534"), std::string::npos) << message;
}

// ---- Deferred durability (the dolsot server's store) ----

// Holds the flusher before each flush until Open() is called: a save that
// returned is then in its pending file only.
class FlushGate {
 public:
  void Hold() {
    std::unique_lock<std::mutex> lock(mutex_);
    ++waiting_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
  }
  void WaitForFlusher() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return waiting_ > 0; });
  }
  void Open() {
    std::lock_guard<std::mutex> guard(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int waiting_ = 0;
  bool open_ = false;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  ::chmod(path.c_str(), 0600);
}

// A store with deferred durability in `dir`, whose flusher waits at `gate`.
StatusOr<std::unique_ptr<FileStore>> OpenGatedDeferred(const std::string& dir, FlushGate& gate) {
  FileStoreOptions options;
  options.defer_durability = true;
  options.before_flush = [&gate] { gate.Hold(); };
  return FileStore::Open(dir, 7, options);
}

TEST_F(FileStoreTest, DeferredSaveIsInThePendingFileAtOnceAndDurableAfterTheFlush) {
  FlushGate gate;
  const std::string dir = root_ + "/sessions";
  auto deferred = OpenGatedDeferred(dir, gate);
  ASSERT_TRUE(deferred.ok()) << deferred.status().ToString();
  ASSERT_TRUE((*deferred)->Save("s", Blob('a', 5000)).ok());
  gate.WaitForFlusher();
  // Not flushed: only the pending file, whole, with its trailer.
  EXPECT_FALSE(fs::exists(dir + "/s.session"));
  const std::string pending = ReadFile(dir + "/s.pending");
  ASSERT_EQ(pending.size(), 5000 + kPendingTrailerSize);
  EXPECT_EQ(PendingBlob(pending).value_or(""), Blob('a', 5000));
  EXPECT_EQ(fs::status(dir + "/s.pending").permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  auto listed = (*deferred)->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id, "s");
  EXPECT_EQ((*listed)[0].size_bytes, 5000u);
  // Another process's store (a direct call after the server was killed)
  // restores it, and makes it the session file.
  auto other = OpenStore();
  auto loaded = other->Load("s");
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ(**loaded, Blob('a', 5000));
  EXPECT_EQ(ReadFile(dir + "/s.session"), Blob('a', 5000));
  EXPECT_FALSE(fs::exists(dir + "/s.pending"));
  gate.Open();
  EXPECT_TRUE((*deferred)->Flush().ok());
  EXPECT_EQ(ReadFile(dir + "/s.session"), Blob('a', 5000));
  // The next save after the flush: pending, then durable.
  ASSERT_TRUE((*deferred)->Save("s", Blob('b', 10)).ok());
  ASSERT_TRUE((*deferred)->Flush().ok());
  EXPECT_EQ(ReadFile(dir + "/s.session"), Blob('b', 10));
  EXPECT_FALSE(fs::exists(dir + "/s.pending"));
}

// The flusher makes the pending file durable by copying it, file to file:
// the store holds no copy of the blob meanwhile. A session another process
// deleted before the flush ran stays deleted (a copy kept in memory brought
// it back), and a large blob arrives whole.
TEST_F(FileStoreTest, TheFlushCopiesThePendingFileAndNeverResurrectsADeletedSession) {
  FlushGate gate;
  const std::string dir = root_ + "/sessions";
  auto deferred = OpenGatedDeferred(dir, gate);
  ASSERT_TRUE(deferred.ok()) << deferred.status().ToString();
  ASSERT_TRUE((*deferred)->Save("gone", Blob('g', 4096)).ok());
  gate.WaitForFlusher();
  auto other = OpenStore();
  auto deleted = other->Delete("gone");
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 1);
  gate.Open();
  EXPECT_TRUE((*deferred)->Flush().ok());
  EXPECT_FALSE(fs::exists(dir + "/gone.session"));
  EXPECT_FALSE(fs::exists(dir + "/gone.pending"));
  auto loaded = (*deferred)->Load("gone");
  ASSERT_TRUE(loaded.ok());
  EXPECT_FALSE(loaded->has_value());
  // Larger than any buffer on the way, with bytes that differ along it.
  std::string big(3 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131) >> 7);
  ASSERT_TRUE((*deferred)->Save("big", big).ok());
  ASSERT_TRUE((*deferred)->Flush().ok());
  EXPECT_FALSE(fs::exists(dir + "/big.pending"));
  EXPECT_TRUE(ReadFile(dir + "/big.session") == big);
}

TEST_F(FileStoreTest, ATornPendingFileIsIgnoredForTheLastDurableCheckpoint) {
  auto store = OpenStore();
  const std::string dir = root_ + "/sessions";
  ASSERT_TRUE(store->Save("s", Blob('a', 9000)).ok());  // durable
  const std::string whole = Blob('b', 9000) + PendingTrailer(Blob('b', 9000));
  std::string zeroed = whole;
  std::fill(zeroed.begin() + 4096, zeroed.begin() + 8192, '\0');
  std::string stale = whole;
  stale[100] = 'a';
  const std::vector<std::pair<std::string, std::string>> torn = {
      {"empty", ""},
      {"truncated", whole.substr(0, 4096)},
      {"trailer cut", whole.substr(0, whole.size() - 1)},
      {"no trailer", Blob('b', 9000)},
      {"zeroed block", zeroed},
      {"one stale byte", stale},
      {"zeroed trailer", Blob('b', 9000) + std::string(kPendingTrailerSize, '\0')},
  };
  for (const auto& [name, bytes] : torn) {
    WriteFile(dir + "/s.pending", bytes);
    auto loaded = store->Load("s");
    ASSERT_TRUE(loaded.ok() && loaded->has_value()) << name;
    EXPECT_EQ(**loaded, Blob('a', 9000)) << name;
    EXPECT_FALSE(fs::exists(dir + "/s.pending")) << name;
  }
  // A pending file with no session file beside it, torn: no session.
  WriteFile(dir + "/t.pending", whole.substr(0, 100));
  auto none = store->Load("t");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  // A whole one wins over the older session file.
  WriteFile(dir + "/s.pending", whole);
  auto loaded = store->Load("s");
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ(**loaded, Blob('b', 9000));
}

TEST_F(FileStoreTest, APendingFileIsReadOnlyWhenItIsTheUsersOwnRegularFile) {
  auto store = OpenStore();
  const std::string dir = root_ + "/sessions";
  const std::string planted = root_ + "/planted";
  WriteFile(planted, Blob('x', 10) + PendingTrailer(Blob('x', 10)));
  fs::create_symlink(planted, dir + "/s.pending");
  auto loaded = store->Load("s");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), ErrorCode::kPermission);
  EXPECT_NE(loaded.status().message().find("symlink"), std::string::npos);
  fs::remove(dir + "/s.pending");
  fs::create_directory(dir + "/s.pending");
  loaded = store->Load("s");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), ErrorCode::kPermission);
  fs::remove(dir + "/s.pending");
  if (::geteuid() == 0) {
    WriteFile(dir + "/s.pending", Blob('x', 10) + PendingTrailer(Blob('x', 10)));
    ASSERT_EQ(::chown((dir + "/s.pending").c_str(), 65534, 65534), 0);
    loaded = store->Load("s");
    ASSERT_FALSE(loaded.ok());
    EXPECT_NE(loaded.status().message().find("another user"), std::string::npos);
  }
}

TEST_F(FileStoreTest, AFailedFlushIsReportedOnceAndTheNewestStateIsKept) {
  std::vector<std::string> log;
  std::mutex log_mutex;
  FileStoreOptions options;
  options.defer_durability = true;
  options.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> guard(log_mutex);
    log.push_back(line);
  };
  auto store = FileStore::Open(root_ + "/sessions", 7, options);
  ASSERT_TRUE(store.ok());
  const std::string dir = root_ + "/sessions";
  // A directory where the session file goes: the rename of the flush fails.
  fs::create_directories(dir + "/f.session/in-the-way");
  ASSERT_TRUE((*store)->Save("f", Blob('n', 100)).ok());  // the write itself works
  Status flushed = (*store)->Flush();
  ASSERT_FALSE(flushed.ok());
  EXPECT_NE(flushed.message().find("'f'"), std::string::npos) << flushed.message();
  auto error = (*store)->TakeFlushError("f");
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("could not be made durable"), std::string::npos) << *error;
  EXPECT_FALSE((*store)->TakeFlushError("f").has_value());  // once
  {
    std::lock_guard<std::mutex> guard(log_mutex);
    ASSERT_EQ(log.size(), 1u);
    EXPECT_EQ(log[0], *error);
  }
  // The pending file keeps the newest state; once the way is clear, a load
  // makes it durable.
  fs::remove_all(dir + "/f.session");
  auto loaded = (*store)->Load("f");
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ(**loaded, Blob('n', 100));
  EXPECT_EQ(ReadFile(dir + "/f.session"), Blob('n', 100));
  EXPECT_FALSE(fs::exists(dir + "/f.pending"));
}

TEST_F(FileStoreTest, ADeferredWriteErrorIsTheSavesOwn) {
  FileStoreOptions options;
  options.defer_durability = true;
  auto store = FileStore::Open(root_ + "/sessions", 7, options);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Save("s", Blob('a', 10)).ok());
  ASSERT_TRUE((*store)->Flush().ok());
  // A full disk as the kernel reports it to a writer over its file-size
  // limit (EFBIG), in a child so the limit stays there.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{0, 0};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    Status saved = (*store)->Save("s", Blob('b', 10));
    ::_exit(saved.ok() ? 0 : saved.code() == ErrorCode::kIo ? 3 : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  auto loaded = (*store)->Load("s");
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ(**loaded, Blob('a', 10));
}

TEST_F(FileStoreTest, DeleteAndResetAllTakePendingFilesToo) {
  FlushGate gate;
  FileStoreOptions options;
  options.defer_durability = true;
  auto store = FileStore::Open(root_ + "/sessions", 7, options);
  ASSERT_TRUE(store.ok());
  const std::string dir = root_ + "/sessions";
  ASSERT_TRUE((*store)->Save("a", Blob('a', 10)).ok());
  ASSERT_TRUE((*store)->Save("b", Blob('b', 10)).ok());
  auto deleted = (*store)->Delete("a");  // after its flush, never before
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 1);
  EXPECT_FALSE(fs::exists(dir + "/a.session") || fs::exists(dir + "/a.pending"));
  WriteFile(dir + "/c.pending", Blob('c', 10) + PendingTrailer(Blob('c', 10)));
  deleted = (*store)->Delete("all");
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 2);  // b and c
  auto listed = (*store)->List();
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  EXPECT_TRUE(fs::is_empty(dir) || (fs::exists(dir + "/.reaped") && std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1));
}

TEST_F(FileStoreTest, ConcurrentDeferredSavesEndWithTheLastOfEachSession) {
  FileStoreOptions options;
  options.defer_durability = true;
  auto store = FileStore::Open(root_ + "/sessions", 7, options);
  ASSERT_TRUE(store.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::string sid = "s" + std::to_string(t);
      for (char v = 'a'; v <= 'j'; ++v) ASSERT_TRUE((*store)->Save(sid, Blob(v, 3000 + t)).ok());
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_TRUE((*store)->Flush().ok());
  const std::string dir = root_ + "/sessions";
  for (int t = 0; t < 4; ++t) {
    const std::string sid = "s" + std::to_string(t);
    EXPECT_EQ(ReadFile(dir + "/" + sid + ".session"), Blob('j', 3000 + t));
    EXPECT_FALSE(fs::exists(dir + "/" + sid + ".pending"));
  }
}

TEST(PendingFileTest, TrailerFramesExactlyItsBlob) {
  for (const std::string& blob : {std::string(), std::string("x"), std::string(100000, '\xff')}) {
    const std::string file = blob + PendingTrailer(blob);
    ASSERT_EQ(file.size(), blob.size() + kPendingTrailerSize);
    EXPECT_EQ(PendingBlob(file).value_or("?"), blob);
    for (std::size_t i = 0; i < file.size(); i += 997) {  // any changed byte is refused
      std::string bad = file;
      bad[i] = static_cast<char>(bad[i] ^ 0x10);
      EXPECT_FALSE(PendingBlob(bad).has_value()) << i;
    }
    EXPECT_FALSE(PendingBlob(file + "x").has_value());
    EXPECT_FALSE(PendingBlob(file.substr(1)).has_value());
  }
}

TEST_F(FileStoreTest, AppendsToTheSessionFileOnly) {
  auto store = OpenStore();
  const std::string file = root_ + "/sessions/s.session";
  EXPECT_EQ(store->Append("s", "x").code(), ErrorCode::kInvalidSession);
  EXPECT_FALSE(fs::exists(file));  // an append makes no session
  ASSERT_TRUE(store->Save("s", "base").ok());
  ASSERT_TRUE(store->Append("s", std::string("+1\0", 3)).ok());
  ASSERT_TRUE(store->Append("s", "+2").ok());
  EXPECT_EQ(**store->Load("s"), std::string("base+1\0+2", 9));
  EXPECT_EQ((*store->List())[0].size_bytes, 9u);
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  ASSERT_TRUE(store->Save("s", "new").ok());  // a save replaces blob and appends
  EXPECT_EQ(**store->Load("s"), "new");
  EXPECT_EQ(store->Append("a/b", "x").code(), ErrorCode::kInvalidSession);
}

TEST_F(FileStoreTest, NeverAppendsThroughASymlinkOrToAForeignFile) {
  auto store = OpenStore();
  const std::string secret = root_ + "/secret";
  WriteFile(secret, "secret");
  fs::create_symlink(secret, root_ + "/sessions/evil.session");
  Status appended = store->Append("evil", "owned");
  EXPECT_EQ(appended.code(), ErrorCode::kPermission);
  EXPECT_NE(appended.message().find("symlink"), std::string::npos);
  EXPECT_EQ(ReadFile(secret), "secret");
  fs::remove(root_ + "/sessions/evil.session");
  fs::create_directory(root_ + "/sessions/evil.session");
  EXPECT_FALSE(store->Append("evil", "owned").ok());
  if (::geteuid() == 0) {
    fs::remove(root_ + "/sessions/evil.session");
    WriteFile(root_ + "/sessions/evil.session", "theirs");
    ASSERT_EQ(::chown((root_ + "/sessions/evil.session").c_str(), 65534, 65534), 0);
    EXPECT_EQ(store->Append("evil", "owned").code(), ErrorCode::kPermission);
    EXPECT_EQ(ReadFile(root_ + "/sessions/evil.session"), "theirs");
  }
}

TEST_F(FileStoreTest, AppendsNotToAnExpiredSessionNorPastAPendingFile) {
  auto store = OpenStore();
  const std::string dir = root_ + "/sessions";
  ASSERT_TRUE(store->Save("old", "base").ok());
  SetAgeDays(dir + "/old.session", 8);  // past the store's 7 days
  EXPECT_EQ(store->Append("old", "x").code(), ErrorCode::kInvalidSession);
  ASSERT_TRUE(store->Save("s", "base").ok());
  WriteFile(dir + "/s.pending", Blob('p', 10) + PendingTrailer(Blob('p', 10)));
  EXPECT_EQ(store->Append("s", "x").code(), ErrorCode::kUnavailable);
  EXPECT_EQ(**store->Load("s"), Blob('p', 10));  // the pending save, untouched
}

TEST_F(FileStoreTest, ADeferredAppendFollowsTheSavesFlushAndIsFlushedItself) {
  FileStoreOptions deferred;
  deferred.defer_durability = true;
  int flushes = 0;
  deferred.before_flush = [&flushes] { ++flushes; };
  auto opened = FileStore::Open(root_ + "/sessions", 7, deferred);
  ASSERT_TRUE(opened.ok());
  FileStore& store = **opened;
  const std::string file = root_ + "/sessions/d.session";
  EXPECT_EQ(store.Append("d", "x").code(), ErrorCode::kInvalidSession);
  ASSERT_TRUE(store.Save("d", "base").ok());  // a pending file, flushed later
  ASSERT_TRUE(store.Append("d", "+1").ok());  // after that flush: into the session file
  EXPECT_FALSE(fs::exists(root_ + "/sessions/d.pending"));
  EXPECT_EQ(ReadFile(file), "base+1");  // in the kernel at once
  ASSERT_TRUE(store.Append("d", "+2").ok());
  EXPECT_EQ(**store.Load("d"), "base+1+2");
  ASSERT_TRUE(store.Flush().ok());
  EXPECT_EQ(flushes, 3);  // the save's, and one fdatasync per append
  EXPECT_FALSE(store.TakeFlushError("d").has_value());
}

}  // namespace
}  // namespace dolsot
