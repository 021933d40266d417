// Masking a sandbox's /proc (see proc_masks.h).
#include "sandbox/proc_masks.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "core/unique_fd.h"

namespace dolsot {
namespace {

Status Failed(const std::string& what) {
  return Status(ErrorCode::kUnavailable, "mask /proc: " + what + ": " + std::strerror(errno));
}

// The kind of `path` without following a symlink; 0 when it is missing.
mode_t KindOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & S_IFMT;
}

}  // namespace

const std::vector<std::string>& MaskedProcFiles() {
  static const std::vector<std::string> files = {
      "cmdline",      "keys",          "key-users",   "kcore",       "kallsyms",
      "kmsg",         "latency_stats", "timer_list",  "timer_stats", "sched_debug",
      "interrupts",   "config.gz",     "modules",     "slabinfo",    "sysrq-trigger"};
  return files;
}

const std::vector<std::string>& MaskedProcDirectories() {
  static const std::vector<std::string> dirs = {"acpi", "asound", "scsi", "driver", "bus",
                                                "irq", "tty", "fs"};
  return dirs;
}

const std::vector<std::string>& ReadOnlyProcPaths() {
  static const std::vector<std::string> paths = {"sys"};
  return paths;
}

Status MaskProc(const std::string& proc, const std::string& null) {
  for (const std::string& name : MaskedProcFiles()) {
    const std::string path = proc + "/" + name;
    if (KindOf(path) != S_IFREG) continue;
    if (::mount(null.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      return Failed("bind " + null + " over " + path);
    }
  }
  for (const std::string& name : MaskedProcDirectories()) {
    const std::string path = proc + "/" + name;
    if (KindOf(path) != S_IFDIR) continue;
    if (::mount("tmpfs", path.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                "mode=0555,size=4k") != 0) {
      return Failed("an empty tmpfs over " + path);
    }
  }
  for (const std::string& name : ReadOnlyProcPaths()) {
    const std::string path = proc + "/" + name;
    if (KindOf(path) != S_IFDIR) continue;
    if (::mount(path.c_str(), path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
        ::mount(nullptr, path.c_str(), nullptr,
                MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
      return Failed("make " + path + " read-only");
    }
  }
  return Status::Ok();
}

}  // namespace dolsot
