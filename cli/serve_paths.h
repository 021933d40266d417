// Where the dolsot server of one cache directory keeps its socket, locks and
// log: in the cache directory itself when the socket's path fits in
// sun_path (108 bytes), else in a 0700 directory named by a hash of the
// cache directory under $XDG_RUNTIME_DIR or /tmp/dolsot-<uid>/.
#pragma once

#include <string>

#include "core/config.h"
#include "core/status.h"

namespace dolsot::cli {

struct ServePaths {
  std::string cache_dir;   // the cache directory's realpath: the server's key
  std::string directory;   // where the files below are
  std::string socket;      // the unix stream socket
  std::string staged;      // where it is bound and made to listen before it is renamed to `socket`
  std::string lock;        // flock()ed by the server for its whole life
  std::string start_lock;  // flock()ed by whoever starts a server, until it listens
  std::string log;         // the server's stderr
};

// The longest socket path a sockaddr_un holds (with its NUL).
inline constexpr std::size_t kMaxSocketPath = 107;

// Creates the cache directory when missing (as the store does: 0700,
// refusing one owned by someone else or a symlink) and returns its realpath.
StatusOr<std::string> CanonicalCacheDir(const EnvLookup& env);

// The paths for `cache_dir` (a realpath); creates and checks the directory
// holding them when it is not the cache directory: a directory that is a
// symlink, not ours, or open to others is refused (kPermission).
StatusOr<ServePaths> ResolveServePaths(const std::string& cache_dir, const EnvLookup& env);

// 16 hex digits (FNV-1a 64) of `text`.
std::string PathHash(const std::string& text);

// mkdir(path, 0700) unless it exists; then it must be a directory (not a
// symlink) owned by us with no access for group or others.
Status EnsurePrivateDirectory(const std::string& path);

}  // namespace dolsot::cli
