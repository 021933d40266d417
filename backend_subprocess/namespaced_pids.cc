// Reading NSpid and children lists from the host's /proc.
#include "backend_subprocess/namespaced_pids.h"

#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace dolsot {
namespace {

// The children of `pid` from every process's parent link in /proc: the slow
// way, for a kernel without children lists (CONFIG_PROC_CHILDREN).
std::vector<pid_t> ChildPidsByScan(pid_t pid) {
  std::vector<pid_t> out;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (dirent* entry = ::readdir(dir)) {
    char* end;
    long candidate = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || candidate <= 0) continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    auto close_paren = text.rfind(')');
    if (close_paren == std::string::npos) continue;
    std::istringstream rest(text.substr(close_paren + 1));
    char state;
    long ppid;
    if (rest >> state >> ppid && ppid == pid) out.push_back(static_cast<pid_t>(candidate));
  }
  ::closedir(dir);
  return out;
}

}  // namespace

std::vector<pid_t> ChildPids(pid_t pid) {
  std::vector<pid_t> out;
  std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(tasks.c_str());
  if (dir == nullptr) return out;
  bool listed = false;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream list(tasks + "/" + entry->d_name + "/children");
    if (!list.is_open()) continue;
    listed = true;
    for (long child; list >> child;) {
      if (child > 0) out.push_back(static_cast<pid_t>(child));
    }
  }
  ::closedir(dir);
  if (!listed) return ChildPidsByScan(pid);
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
