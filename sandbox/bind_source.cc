// Opening the Sandbox's bind sources without following what a session could
// have planted (see bind_source.h).
#include "sandbox/bind_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>

namespace dolsot {
namespace {

// The kernel's own bound on symlinks in one lookup (MAXSYMLINKS).
constexpr int kMaxSymlinks = 40;

// "a/b//c" -> {"a", "b", "c"}, in front of `rest` ("." dropped).
void PushComponents(std::string_view path, std::deque<std::string>* rest) {
  std::deque<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (!part.empty() && part != ".") parts.emplace_back(part);
    start = end + 1;
  }
  rest->insert(rest->begin(), parts.begin(), parts.end());
}

Status Refused(std::string_view path, const std::string& walked, const std::string& tree) {
  return Status(ErrorCode::kPermission,
                "the host path '" + std::string(path) + "' is reached through the read-write mount's "
                "directory '" + tree + "' (at '" + walked + "'): a cell can change what is there "
                "(a symlink, a rename), so the sandbox does not bind it; bind it from outside every "
                "read-write mount, or make that mount read-only or an overlay");
}

// One directory of the walk: its descriptor and its path so far (for messages).
struct Step {
  UniqueFd fd;
  std::string path;
  std::string tree;  // set when this directory is a writable tree's root
};

}  // namespace

StatusOr<FileIdentity> IdentityOf(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return IoError(std::string("fstat: ") + std::strerror(errno));
  return FileIdentity{st.st_dev, st.st_ino};
}

bool WritableTrees::Holds(const FileIdentity& id, std::string* name) const {
  for (std::size_t i = 0; i < roots.size(); ++i) {
    if (roots[i] == id) {
      if (name != nullptr) *name = i < names.size() ? names[i] : std::string("?");
      return true;
    }
  }
  return false;
}

StatusOr<UniqueFd> OpenBindSource(int root, std::string_view path, const WritableTrees& writable,
                                  bool follow_symlinks) {
  if (path.empty() || path[0] != '/') {
    return InvalidArgument("a bind source must be an absolute path, got '" + std::string(path) + "'");
  }
  std::vector<Step> stack;
  auto push_root = [&]() -> Status {
    stack.clear();
    UniqueFd fd(::openat(root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return IoError("open the host's root: " + std::string(std::strerror(errno)));
    auto id = IdentityOf(fd.get());
    if (!id.ok()) return id.status();
    std::string tree;
    writable.Holds(*id, &tree);
    stack.push_back({std::move(fd), "/", tree});
    return Status::Ok();
  };
  DOLSOT_RETURN_IF_ERROR(push_root());
  std::deque<std::string> rest;
  PushComponents(path, &rest);
  int links = 0;
  while (!rest.empty()) {
    std::string name = std::move(rest.front());
    rest.pop_front();
    if (name == "..") {
      if (stack.size() > 1) stack.pop_back();
      continue;
    }
    const Step& here = stack.back();
    const std::string walked = here.path == "/" ? "/" + name : here.path + "/" + name;
    // Nothing inside a writable tree is looked up: whatever is there, a
    // cell may have put there.
    if (!here.tree.empty()) return Refused(path, walked, here.tree);
    UniqueFd next(::openat(here.fd.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      const int err = errno;
      return Status(err == ENOENT ? ErrorCode::kInvalidArgument : ErrorCode::kIo,
                    "the host path '" + std::string(path) + "': " + walked + ": " + std::strerror(err));
    }
    struct stat st {};
    if (::fstat(next.get(), &st) != 0) return IoError("fstat " + walked + ": " + std::strerror(errno));
    if (S_ISLNK(st.st_mode)) {
      if (!follow_symlinks) {
        return Status(ErrorCode::kPermission,
                      "the host path '" + std::string(path) + "' passes through the symlink " +
                          walked + "; give the path it stands for");
      }
      // Outside every writable tree (checked above): the host's own link.
      if (++links > kMaxSymlinks) {
        return IoError("the host path '" + std::string(path) + "': too many levels of symbolic links");
      }
      char target[4096];
      ssize_t n = ::readlinkat(next.get(), "", target, sizeof target - 1);
      if (n < 0) return IoError("readlink " + walked + ": " + std::strerror(errno));
      std::string_view link(target, static_cast<std::size_t>(n));
      if (link.empty()) return IoError("readlink " + walked + ": an empty symlink");
      PushComponents(link, &rest);
      if (link[0] == '/') DOLSOT_RETURN_IF_ERROR(push_root());
      continue;
    }
    if (!rest.empty() && !S_ISDIR(st.st_mode)) {
      return InvalidArgument("the host path '" + std::string(path) + "': " + walked +
                             " is not a directory");
    }
    std::string tree;
    writable.Holds(FileIdentity{st.st_dev, st.st_ino}, &tree);
    stack.push_back({std::move(next), walked, tree});
  }
  return std::move(stack.back().fd);
}

std::string DescriptorPath(const std::string& proc, int fd) {
  return proc + "/self/fd/" + std::to_string(fd);
}

Status CheckMountSources(const std::vector<SandboxMount>& mounts) {
  for (const SandboxMount& mount : mounts) {
    struct stat st;
    if (::stat(mount.host_path.c_str(), &st) == 0) continue;
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return Status(ErrorCode::kConfig, "mount " + mount.virtual_path + ": the host path '" +
                                            mount.host_path + "' does not exist");
    }
    // Anything else (a directory the host cannot search, ...) is the
    // worker's to report when it opens the source.
  }
  return Status::Ok();
}

}  // namespace dolsot
