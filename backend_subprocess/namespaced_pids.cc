// Reading NSpid and children lists from the host's /proc.
#include "backend_subprocess/namespaced_pids.h"

#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dolsot {
std::vector<pid_t> ChildPids(pid_t pid) {
  std::vector<pid_t> out;
  std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(tasks.c_str());
  if (dir == nullptr) return out;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream list(tasks + "/" + entry->d_name + "/children");
    for (long child; list >> child;) {
      if (child > 0) out.push_back(static_cast<pid_t>(child));
    }
  }
  ::closedir(dir);
  return out;
}

std::optional<pid_t> InnermostPid(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    long last = -1;
    for (long value; fields >> value;) last = value;
    if (last > 0) return static_cast<pid_t>(last);
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<pid_t> DescendantByInnermostPid(pid_t ancestor, pid_t inner, int depth) {
  std::vector<pid_t> level{ancestor};
  for (int d = 0; d < depth && !level.empty(); ++d) {
    std::vector<pid_t> next;
    for (pid_t p : level) {
      for (pid_t child : ChildPids(p)) {
        if (InnermostPid(child) == inner) return child;
        next.push_back(child);
      }
    }
    level = std::move(next);
  }
  return std::nullopt;
}

}  // namespace dolsot
