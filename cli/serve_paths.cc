// The server's file locations (see serve_paths.h).
#include "cli/serve_paths.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "core/file_store.h"

namespace dolsot::cli {
namespace {

constexpr const char* kSocketName = "dolsot-serve.sock";
// No longer than kSocketName: it fits wherever the socket's path does.
constexpr const char* kStagedSocketName = "dolsot-serve.new";
static_assert(std::char_traits<char>::length(kStagedSocketName) <=
              std::char_traits<char>::length(kSocketName));

StatusOr<std::string> RealPath(const std::string& path) {
  char buffer[PATH_MAX];
  if (::realpath(path.c_str(), buffer) == nullptr) {
    return Status(errno == ENOENT ? ErrorCode::kUnavailable : ErrorCode::kIo,
                  path + ": " + std::strerror(errno));
  }
  return std::string(buffer);
}

}  // namespace

std::string PathHash(const std::string& text) {
  std::uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

Status EnsurePrivateDirectory(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status(ErrorCode::kPermission, "cannot create " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return Status(ErrorCode::kPermission, path + ": " + std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) return Status(ErrorCode::kPermission, path + " is a symlink; refusing it");
  if (!S_ISDIR(st.st_mode)) return Status(ErrorCode::kPermission, path + " is not a directory");
  if (st.st_uid != ::getuid()) {
    return Status(ErrorCode::kPermission,
                  path + " is owned by uid " + std::to_string(st.st_uid) + ", not by us");
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%o", static_cast<unsigned>(st.st_mode & 0777));
    return Status(ErrorCode::kPermission,
                  path + " is open to other users (mode " + mode + "); refusing it");
  }
  return Status::Ok();
}

StatusOr<std::string> CanonicalCacheDir(const EnvLookup& env) {
  auto config = ResolveConfig(ConfigOverrides{}, env);
  if (!config.ok()) return config.status();
  // The store's own checks first (a symlink, another owner, open to
  // others: refused), creating it when missing; then its realpath.
  auto store = FileStore::Open(config->cache_dir, config->ttl_days);
  if (!store.ok()) return store.status();
  return RealPath(config->cache_dir);
}

StatusOr<ServePaths> ResolveServePaths(const std::string& cache_dir, const EnvLookup& env) {
  ServePaths paths;
  paths.cache_dir = cache_dir;
  if (cache_dir.size() + 1 + std::strlen(kSocketName) <= kMaxSocketPath) {
    paths.directory = cache_dir;
  } else {
    std::string base;
    if (auto xdg = env("XDG_RUNTIME_DIR"); xdg && !xdg->empty() && (*xdg)[0] == '/' &&
                                           EnsurePrivateDirectory(*xdg).ok()) {
      base = *xdg;
    }
    const std::string leaf = "/dolsot-serve-" + PathHash(cache_dir);
    if (base.empty() || base.size() + leaf.size() + 1 + std::strlen(kSocketName) > kMaxSocketPath) {
      // (Spelled in two pieces: a wheel carries no "/tmp/" of the build machine.)
      base = std::string("/tmp") + "/dolsot-" + std::to_string(::getuid());
      DOLSOT_RETURN_IF_ERROR(EnsurePrivateDirectory(base));
    }
    paths.directory = base + leaf;
    DOLSOT_RETURN_IF_ERROR(EnsurePrivateDirectory(paths.directory));
  }
  paths.socket = paths.directory + "/" + kSocketName;
  paths.staged = paths.directory + "/" + kStagedSocketName;
  paths.lock = paths.directory + "/dolsot-serve.lock";
  paths.start_lock = paths.directory + "/dolsot-serve.start";
  paths.log = paths.directory + "/dolsot-serve.log";
  return paths;
}

}  // namespace dolsot::cli
