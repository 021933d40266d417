// Helpers shared by the typecheck suites: scratch directories, fake ty
// scripts, the real ty binary when installed, and a request against
// examples/toolbox/mytools.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "typecheck/type_check.h"

namespace dolsot::typecheck_testing {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline std::string ToolboxDir() { return std::string(DOLSOT_SOURCE_DIR) + "/examples/toolbox"; }

// A scratch directory, removed with its contents by the destructor.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = fs::temp_directory_path().string() + "/dolsot-typecheck-test-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes an executable /bin/sh script and returns its path.
  std::string Script(const std::string& name, const std::string& body) const {
    std::string file = path_ + "/" + name;
    std::ofstream(file) << "#!/bin/sh\n" << body;
    chmod(file.c_str(), 0755);
    return file;
  }

 private:
  std::string path_;
};

// Sets an environment variable for the life of the object, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// The ty binary to test with: DOLSOT_TY_BIN, else `ty` on PATH; "" if none.
inline std::string FindTy() {
  const char* env = std::getenv("DOLSOT_TY_BIN");
  if (env && *env) return access(env, X_OK) == 0 ? env : "";
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "";
  while (true) {
    std::size_t colon = dirs.find(':');
    std::string candidate = std::string(dirs.substr(0, colon)) + "/ty";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) return "";
    dirs.remove_prefix(colon + 1);
  }
}

inline constexpr const char* kNoTy =
    "ty is not installed (pip install ty==0.0.104, or set DOLSOT_TY_BIN)";

// A check of `code` against {mt: mytools} from examples/toolbox, 30 s to go.
inline TypeCheckRequest MytoolsRequest(std::string_view code) {
  TypeCheckRequest request;
  request.code = code;
  request.toolboxes = {{"mt", "mytools"}};
  request.python_path = {ToolboxDir()};
  request.deadline = Clock::now() + std::chrono::seconds(30);
  return request;
}

// The number of lines in `file` (0 when it does not exist).
inline int LineCount(const std::string& file) {
  std::ifstream in(file);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

}  // namespace dolsot::typecheck_testing
