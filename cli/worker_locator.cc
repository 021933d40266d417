// Locating dolsot-worker relative to the running CLI.
#include "cli/worker_locator.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dolsot::cli {
namespace {

std::string Directory(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool IsExecutableFile(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::vector<std::string> WorkerCandidates(const std::string& cli_path,
                                          const std::string& build_tree_worker) {
  std::vector<std::string> candidates;
  if (!cli_path.empty()) {
    const std::string dir = Directory(cli_path);
    candidates.push_back(dir + "/" + kWorkerName);
    candidates.push_back(dir + "/../libexec/dolsot/" + kWorkerName);
  }
  if (!build_tree_worker.empty()) candidates.push_back(build_tree_worker);
  return candidates;
}

std::optional<std::string> FindWorker(const std::vector<std::string>& candidates) {
  for (const auto& candidate : candidates) {
    if (IsExecutableFile(candidate)) return candidate;
  }
  return std::nullopt;
}

std::string ScriptInterpreter(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char head[PATH_MAX + 3];
  ssize_t length = ::read(fd, head, sizeof(head));
  ::close(fd);
  if (length < 3 || head[0] != '#' || head[1] != '!') return "";
  std::string line(head + 2, static_cast<std::size_t>(length) - 2);
  line = line.substr(0, line.find('\n'));
  const std::size_t start = line.find_first_not_of(" \t");
  if (start == std::string::npos || line[start] != '/') return "";
  std::string interpreter = line.substr(start, line.find_first_of(" \t\r", start) - start);
  const bool python = interpreter.compare(interpreter.rfind('/') + 1, 6, "python") == 0;
  return python && IsExecutableFile(interpreter) ? interpreter : "";
}

std::string CurrentExecutablePath() {
  char buffer[PATH_MAX];
  const ssize_t length = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (length <= 0) return "";
  return std::string(buffer, static_cast<std::size_t>(length));
}

}  // namespace dolsot::cli
