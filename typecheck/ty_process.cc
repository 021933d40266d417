// TyProcess: spawning `ty server` in its own process group with a private
// workspace, and killing, reaping and removing them (see ty_process.h).
#include "typecheck/ty_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <vector>

#include "core/child_process.h"
#include "core/unique_fd.h"

extern char** environ;

namespace dolsot::typecheck {
namespace {

constexpr std::string_view kConfigHomeVariable = "XDG_CONFIG_HOME=";

std::string ErrnoText() { return std::strerror(errno); }

StatusOr<std::string> MakeWorkspace() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/dolsot-ty-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return IoError("cannot create a workspace for ty in " + pattern + ": " + ErrnoText());
  }
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(pattern, ec);
  return ec ? pattern : absolute.lexically_normal().string();
}

// The host's environment, XDG_CONFIG_HOME replaced by `config_home`.
std::vector<std::string> ChildEnvironment(const std::string& config_home) {
  std::vector<std::string> out;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    if (text.substr(0, kConfigHomeVariable.size()) != kConfigHomeVariable) out.emplace_back(text);
  }
  out.push_back(std::string(kConfigHomeVariable) + config_home);
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<TyProcess>> TyProcess::Spawn(const std::string& ty) {
  StatusOr<std::string> workspace = MakeWorkspace();
  if (!workspace.ok()) return workspace.status();
  // From here on the destructor undoes whatever was done.
  std::unique_ptr<TyProcess> process(new TyProcess(*workspace, -1, -1));
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return IoError("socketpair: " + ErrnoText());
  }
  process->channel_ = pair[0];
  UniqueFd child_end(pair[1]);
  std::vector<std::string> env = ChildEnvironment(*workspace);
  StatusOr<pid_t> pid = SpawnWithStdio({ty, "server"}, &env, child_end.get());
  child_end.Reset();
  if (!pid.ok()) return pid.status();
  process->pid_ = *pid;
  return process;
}

TyProcess::~TyProcess() {
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (channel_ >= 0) close(channel_);
  if (!workspace_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(workspace_, ignored);
  }
}

int TyProcess::TakeChannel() {
  int channel = channel_;
  channel_ = -1;
  return channel;
}

void TyProcess::Disown() {
  pid_ = -1;
  workspace_.clear();
  if (channel_ >= 0) close(channel_);
  channel_ = -1;
}

namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

StatusOr<std::string> ResolveTyBinary(const std::string& bin, const std::string& python_executable) {
  if (bin.empty()) return InvalidArgument("ty_bin is empty");
  if (bin.find('/') != std::string::npos) {
    if (access(bin.c_str(), X_OK) == 0) return bin;
    return IoError("ty not found at " + bin);
  }
  // The environment's own ty first: pip puts dolsot[typecheck]'s ty beside
  // the interpreter, and a venv's python runs without its bin/ on PATH.
  std::size_t slash = python_executable.rfind('/');
  if (slash != std::string::npos) {
    std::string beside = python_executable.substr(0, slash + 1) + bin;
    if (IsExecutableFile(beside)) return beside;
  }
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    std::size_t colon = dirs.find(':');
    std::string_view dir = dirs.substr(0, colon);
    std::string candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + bin;
    if (IsExecutableFile(candidate)) return candidate;
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return IoError("ty not found beside the interpreter or on PATH (" + bin +
                 "); install dolsot[typecheck]");
}

}  // namespace dolsot::typecheck
