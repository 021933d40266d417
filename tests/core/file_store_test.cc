// FileStore: the security properties (symlink, foreign owner, mode), atomic
// writes under a writer killed mid-save, TTL reaping, and concurrent writers.
#include "core/file_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

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

}  // namespace
}  // namespace dolsot
