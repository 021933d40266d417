// Tests for TyProcess and ResolveTyBinary (typecheck/ty_process.h), with
// shell scripts standing in for ty.
#include "typecheck/ty_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "tests/typecheck/typecheck_test_support.h"

namespace dolsot::typecheck {
namespace {

using namespace typecheck_testing;

// Reads one line from `fd` (blocking).
std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

TEST(TypeGateTyProcess, TheChannelIsTysStdinAndStdout) {
  ScratchDir dir;
  std::string ty =
      dir.Script("ty", "[ \"$1\" = server ] || exit 9\nread line\necho \"got $line\"\n");
  auto process = TyProcess::Spawn(ty);
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  int channel = (*process)->TakeChannel();
  ASSERT_GE(channel, 0);
  EXPECT_EQ((*process)->TakeChannel(), -1);
  ASSERT_EQ(write(channel, "hello\n", 6), 6);
  EXPECT_EQ(ReadLine(channel), "got hello");
  close(channel);
}

// Even when the host has no stdin or stdout (the socket's ends may then be
// fds 0 and 1), ty gets the channel as both.
TEST(TypeGateTyProcess, AHostWithoutStdinOrStdoutStillWiresTheChannel) {
  ScratchDir dir;
  std::string ty = dir.Script("ty", "read line\necho \"got $line\"\n");
  int saved_in = dup(STDIN_FILENO);
  int saved_out = dup(STDOUT_FILENO);
  close(STDIN_FILENO);
  close(STDOUT_FILENO);
  auto process = TyProcess::Spawn(ty);
  int channel = process.ok() ? (*process)->TakeChannel() : -1;
  std::string answer;
  if (channel >= 0 && write(channel, "hi\n", 3) == 3) answer = ReadLine(channel);
  dup2(saved_in, STDIN_FILENO);
  dup2(saved_out, STDOUT_FILENO);
  close(saved_in);
  close(saved_out);
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  EXPECT_EQ(answer, "got hi");
  if (channel >= 0) close(channel);
}

// ty runs in its own process group, with a private empty workspace as its
// config home; the destructor kills and reaps it and removes the workspace.
TEST(TypeGateTyProcess, OwnsItsGroupAndWorkspaceUntilDestroyed) {
  ScratchDir dir;
  ScratchDir tmp;
  ScopedEnv tmpdir("TMPDIR", tmp.path());
  std::string ty = dir.Script("ty", "echo \"$$ $XDG_CONFIG_HOME\"\nexec sleep 60\n");
  std::string workspace;
  pid_t pid = 0;
  {
    auto process = TyProcess::Spawn(ty);
    ASSERT_TRUE(process.ok()) << process.status().ToString();
    workspace = (*process)->workspace();
    int channel = (*process)->TakeChannel();
    std::string line = ReadLine(channel);  // the script is up
    close(channel);
    std::size_t space = line.find(' ');
    ASSERT_NE(space, std::string::npos) << line;
    pid = std::stoi(line.substr(0, space));
    EXPECT_EQ(line.substr(space + 1), workspace);  // XDG_CONFIG_HOME
    EXPECT_EQ(getpgid(pid), pid);                  // leads its own group
    EXPECT_EQ(workspace.rfind(tmp.path() + "/dolsot-ty-", 0), 0u) << workspace;
    struct stat workspace_stat;
    ASSERT_EQ(stat(workspace.c_str(), &workspace_stat), 0);
    EXPECT_EQ(workspace_stat.st_mode & 0777, 0700u);
    EXPECT_TRUE(fs::is_empty(workspace));
  }
  EXPECT_EQ(kill(pid, 0), -1);  // killed and reaped: not even a zombie
  EXPECT_EQ(errno, ESRCH);
  EXPECT_FALSE(fs::exists(workspace));
}

// In a forked copy of the host, Disown leaves ty and its workspace to the
// creator.
TEST(TypeGateTyProcess, ADisownedCopyLeavesTheServerAlone) {
  ScratchDir dir;
  std::string ty = dir.Script("ty", "echo $$\nexec sleep 60\n");
  auto process = TyProcess::Spawn(ty);
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  int channel = (*process)->TakeChannel();
  pid_t ty_pid = std::stoi(ReadLine(channel));
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    (*process)->Disown();
    process->reset();
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(kill(ty_pid, 0), 0);  // still running
  EXPECT_TRUE(fs::exists((*process)->workspace()));
  close(channel);
}

TEST(TypeGateTyProcess, AFailedSpawnLeavesNothingBehind) {
  ScratchDir dir;
  ScratchDir tmp;
  ScopedEnv tmpdir("TMPDIR", tmp.path());
  std::string not_executable = dir.path() + "/ty";
  std::ofstream(not_executable) << "not a program\n";
  auto process = TyProcess::Spawn(not_executable);
  EXPECT_FALSE(process.ok());
  EXPECT_TRUE(fs::is_empty(tmp.path()));
}

TEST(TypeGateResolveTy, FindsAPathOrSearchesPath) {
  ScratchDir dir;
  std::string ty = dir.Script("ty", "exit 0\n");
  EXPECT_EQ(*ResolveTyBinary(ty), ty);
  {
    ScopedEnv path("PATH", "/nonexistent:" + dir.path());
    StatusOr<std::string> found = ResolveTyBinary("ty");
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    EXPECT_EQ(*found, ty);
  }
  EXPECT_NE(ResolveTyBinary("/nonexistent/ty").status().message().find("ty not found at"),
            std::string::npos);
  EXPECT_NE(ResolveTyBinary("dolsot-no-such-ty").status().message().find("or on PATH"),
            std::string::npos);
  EXPECT_FALSE(ResolveTyBinary("").ok());
}

TEST(TypeGateResolveTy, PrefersTheTyBesideTheInterpreter) {
  ScratchDir venv_bin;
  ScratchDir elsewhere;
  std::string own = venv_bin.Script("ty", "exit 0\n");
  std::string python = venv_bin.Script("python", "exit 0\n");
  std::string other = elsewhere.Script("ty", "exit 0\n");
  ScopedEnv path("PATH", elsewhere.path());
  StatusOr<std::string> found = ResolveTyBinary("ty", python);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, own);
  // No ty beside it: PATH's.
  found = ResolveTyBinary("ty", elsewhere.path() + "/../nowhere/python");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, other);
}

}  // namespace
}  // namespace dolsot::typecheck
