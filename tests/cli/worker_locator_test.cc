// Where the CLI looks for dolsot-worker, and which candidate wins.
#include "cli/worker_locator.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace dolsot::cli {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "dolsot-cli-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void WriteFile(const fs::path& path, fs::perms perms, const std::string& text = "#!/bin/sh\n") {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
  fs::permissions(path, perms);
}

TEST(WorkerCandidatesTest, BesideThenLibexecThenBuildTree) {
  EXPECT_EQ(WorkerCandidates("/venv/bin/dolsot", "/build/backend_subprocess/dolsot-worker"),
            (std::vector<std::string>{"/venv/bin/dolsot-worker",
                                      "/venv/bin/../libexec/dolsot/dolsot-worker",
                                      "/build/backend_subprocess/dolsot-worker"}));
  EXPECT_EQ(WorkerCandidates("", ""), std::vector<std::string>{});
}

TEST(FindWorkerTest, PicksTheFirstExecutableFile) {
  TempDir dir;
  const fs::path not_executable = dir.path() / "a" / "dolsot-worker";
  const fs::path executable = dir.path() / "b" / "dolsot-worker";
  WriteFile(not_executable, fs::perms::owner_read);
  WriteFile(executable, fs::perms::owner_all);
  fs::create_directories(dir.path() / "c" / "dolsot-worker");  // a directory
  EXPECT_EQ(FindWorker({(dir.path() / "missing").string(), not_executable.string(),
                        (dir.path() / "c" / "dolsot-worker").string(), executable.string()}),
            executable.string());
  EXPECT_EQ(FindWorker({not_executable.string()}), std::nullopt);
}

TEST(ScriptInterpreterTest, NamesTheAbsoluteExecutableOfTheHashBangLine) {
  TempDir dir;
  const fs::path python = dir.path() / "venv" / "bin" / "python3.11";
  WriteFile(python, fs::perms::owner_all);
  const fs::path script = dir.path() / "dolsot-worker";
  // As pip writes a console script.
  WriteFile(script, fs::perms::owner_all,
            "#!" + python.string() + "\n# -*- coding: utf-8 -*-\nimport sys\n");
  EXPECT_EQ(ScriptInterpreter(script.string()), python.string());
  WriteFile(script, fs::perms::owner_all, "#! " + python.string() + " -E\r\n");
  EXPECT_EQ(ScriptInterpreter(script.string()), python.string());
}

TEST(ScriptInterpreterTest, NothingForBinariesRelativeOrMissingInterpreters) {
  TempDir dir;
  const fs::path script = dir.path() / "dolsot-worker";
  WriteFile(script, fs::perms::owner_all, "\x7f" "ELF\x02\x01");
  EXPECT_EQ(ScriptInterpreter(script.string()), "");
  WriteFile(script, fs::perms::owner_all, "#!python3\n");
  EXPECT_EQ(ScriptInterpreter(script.string()), "");
  WriteFile(script, fs::perms::owner_all, "#!/usr/bin/env python3\n");
  EXPECT_EQ(ScriptInterpreter(script.string()), "");
  WriteFile(script, fs::perms::owner_all, "#!" + (dir.path() / "gone" / "python").string() + "\n");
  EXPECT_EQ(ScriptInterpreter(script.string()), "");
  WriteFile(script, fs::perms::owner_all, "#!");
  EXPECT_EQ(ScriptInterpreter(script.string()), "");
  EXPECT_EQ(ScriptInterpreter((dir.path() / "missing").string()), "");
}

TEST(CurrentExecutablePathTest, NamesThisTestBinary) {
  EXPECT_NE(CurrentExecutablePath().find("worker_locator_test"), std::string::npos);
}

}  // namespace
}  // namespace dolsot::cli
