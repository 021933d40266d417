// Profile keys (which calls share a Repl in the server), request
// environments, the server's file locations and DOLSOT_SERVE_IDLE-like
// parsing helpers that live in the library.
#include "cli/serve_profile.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <set>

#include "cli/serve_paths.h"

namespace dolsot::cli {
namespace {

TEST(ServeProfile, EqualProfilesShareAKeyAndEachDifferenceSplitsIt) {
  BackendSettings base;
  base.toolboxes = {{"mt", "mytools"}};
  const std::vector<std::string> env = {"A=1", "PYTHONPATH=/x"};
  const std::string key = ProfileKey(base, "/work", env);
  EXPECT_EQ(key, ProfileKey(base, "/work", {"PYTHONPATH=/x", "A=1"}));  // order ignored
  BackendSettings timed = base;
  timed.timeout_seconds = 5;  // per cell, not per profile
  EXPECT_EQ(key, ProfileKey(timed, "/work", env));

  BackendSettings other_toolbox = base;
  other_toolbox.toolboxes = {{"mt", "othertools"}};
  BackendSettings gated = base;
  gated.gate = true;
  BackendSettings repr = base;
  repr.max_repr = 10;
  BackendSettings text = base;
  text.max_text = 10;
  for (const auto& different :
       {ProfileKey(other_toolbox, "/work", env), ProfileKey(gated, "/work", env),
        ProfileKey(repr, "/work", env), ProfileKey(text, "/work", env),
        ProfileKey(base, "/work2", env), ProfileKey(base, "/work", {"A=2", "PYTHONPATH=/x"}),
        ProfileKey(base, "/work", {"A=1"})}) {
    EXPECT_NE(key, different);
  }
}

TEST(ServeProfile, TheSandboxPolicyIsPartOfTheKeyEveryFieldOfIt) {
  BackendSettings none;
  BackendSettings boxed;
  boxed.sandbox = SandboxPolicy{};
  const std::vector<std::string> env = {"A=1"};
  const std::string key = ProfileKey(boxed, "/w", env);
  EXPECT_NE(key, ProfileKey(none, "/w", env));  // no sandbox is a policy of its own
  BackendSettings same = boxed;
  EXPECT_EQ(key, ProfileKey(same, "/w", env));
  std::vector<std::function<void(SandboxPolicy&)>> changes = {
      [](SandboxPolicy& p) { p.network = true; },
      [](SandboxPolicy& p) { p.mounts = {{"/d", "/srv", MountMode::kReadOnly}}; },
      [](SandboxPolicy& p) { p.mounts = {{"/d", "/srv", MountMode::kReadWrite}}; },
      [](SandboxPolicy& p) { p.mounts = {{"/e", "/srv", MountMode::kReadOnly}}; },
      [](SandboxPolicy& p) { p.env = {{"X", "1"}}; },
      [](SandboxPolicy& p) { p.memory_mb = 512; },
      [](SandboxPolicy& p) { p.processes = 9; },
      [](SandboxPolicy& p) { p.open_files = 65; },
      [](SandboxPolicy& p) { p.file_size_mb = 1; },
      [](SandboxPolicy& p) { p.disk_mb = 1; },
      [](SandboxPolicy& p) { p.cpu_seconds = 1; },
      [](SandboxPolicy& p) { p.best_effort = true; },
  };
  std::set<std::string> keys = {key};
  for (const auto& change : changes) {
    BackendSettings changed = boxed;
    change(*changed.sandbox);
    keys.insert(ProfileKey(changed, "/w", env));
  }
  EXPECT_EQ(keys.size(), changes.size() + 1);  // each change its own key
}

TEST(ServeProfile, LookupInReadsTheRequestsEnvironmentNotOurs) {
  ::setenv("DOLSOT_PROFILE_TEST_ONLY_HERE", "server", 1);
  auto env = LookupIn({"DOLSOT_TIMEOUT=3", "A=first", "A=second", "AB=x", "EMPTY="});
  EXPECT_EQ(env("DOLSOT_TIMEOUT"), "3");
  EXPECT_EQ(env("A"), "first");
  EXPECT_EQ(env("EMPTY"), "");
  EXPECT_FALSE(env("DOLSOT_PROFILE_TEST_ONLY_HERE").has_value());
  EXPECT_FALSE(env("B").has_value());
  auto config = ResolveConfig(ConfigOverrides{}, env);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->timeout_seconds, 3.0);
}

TEST(ServePaths, ShortCacheDirsHoldTheSocketLongOnesGetAHashedPrivateDirectory) {
  auto no_env = [](const char*) -> std::optional<std::string> { return std::nullopt; };
  auto short_paths = ResolveServePaths("/tmp/c", no_env);
  ASSERT_TRUE(short_paths.ok()) << short_paths.status().ToString();
  EXPECT_EQ(short_paths->socket, "/tmp/c/dolsot-serve.sock");
  EXPECT_EQ(short_paths->lock, "/tmp/c/dolsot-serve.lock");

  const std::string long_dir = "/tmp/" + std::string(120, 'd');
  auto long_paths = ResolveServePaths(long_dir, no_env);
  ASSERT_TRUE(long_paths.ok()) << long_paths.status().ToString();
  EXPECT_LE(long_paths->socket.size(), kMaxSocketPath);
  EXPECT_EQ(long_paths->directory,
            "/tmp/dolsot-" + std::to_string(::getuid()) + "/dolsot-serve-" + PathHash(long_dir));
  struct stat st {};
  ASSERT_EQ(::lstat(long_paths->directory.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_NE(PathHash(long_dir), PathHash(long_dir + "x"));
  std::filesystem::remove(long_paths->directory);
}

TEST(ServePaths, ADirectoryOpenToOthersOrASymlinkIsRefused) {
  const std::string base = "/tmp/dolsot-serve-paths-test-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(base.c_str(), 0755), 0);
  ::chmod(base.c_str(), 0755);
  Status open_dir = EnsurePrivateDirectory(base);
  EXPECT_EQ(open_dir.code(), ErrorCode::kPermission);
  EXPECT_NE(open_dir.message().find("open to other users"), std::string::npos);
  const std::string link = base + "-link";
  ASSERT_EQ(::symlink(base.c_str(), link.c_str()), 0);
  Status linked = EnsurePrivateDirectory(link);
  EXPECT_EQ(linked.code(), ErrorCode::kPermission);
  EXPECT_NE(linked.message().find("symlink"), std::string::npos);
  ::unlink(link.c_str());
  ::chmod(base.c_str(), 0700);
  EXPECT_TRUE(EnsurePrivateDirectory(base).ok());
  ::rmdir(base.c_str());
}

}  // namespace
}  // namespace dolsot::cli
