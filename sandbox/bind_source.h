// BindSource: a host path the Sandbox binds, opened so that no session can
// redirect it. A cell can write only inside the policy's read-write mounts;
// a symlink, a rename or a hard link it leaves there must not change what a
// later worker binds. So every bind source is opened one component at a time
// (O_PATH | O_NOFOLLOW) from the host's root, a component inside a read-write
// mount is never looked up, and the mount is made from the descriptor that
// was checked (/proc/self/fd/N), never from the path string again.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/unique_fd.h"
#include "sandbox/sandbox_policy.h"

namespace dolsot {

// What a directory or file is, whatever its name: (st_dev, st_ino).
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  bool operator==(const FileIdentity&) const = default;
};

StatusOr<FileIdentity> IdentityOf(int fd);

// Host directories a session can write (the read-write mounts' sources),
// by identity: a path that would be looked up inside one of them is refused.
struct WritableTrees {
  std::vector<FileIdentity> roots;
  std::vector<std::string> names;  // the host path of each, for messages

  bool Holds(const FileIdentity& id, std::string* name) const;
};

// Opens the absolute `path` below `root` (an O_PATH descriptor of the host's
// root as the caller sees it) with O_PATH, component by component, without
// ever following a symlink on the kernel's side. A symlink on the way is
// followed here (at most 40, as the kernel does) only when it lies outside
// every tree of `writable`; `..` goes back up the components walked, never
// above `root`. A lookup of a name inside a writable tree (the source lies
// in a read-write mount, or a symlink leads into one and on) is
// refused, naming both: a cell could have planted what is found
// there (kPermission). The tree's own root may be the source itself.
// Without `follow_symlinks` any symlink on the way is kPermission too.
// kInvalidArgument when a component is missing, not a directory, or the
// path is relative.
StatusOr<UniqueFd> OpenBindSource(int root, std::string_view path, const WritableTrees& writable,
                                  bool follow_symlinks = true);

// kConfig naming the first mount whose host path does not exist, so such a
// policy fails where it is made (Sandbox(...), Repl::Create, the CLI's
// flags) instead of at a worker's start. Only a first check: the worker
// still opens every source with OpenBindSource when it starts (a path can
// change in between, and a symlink on it is refused there).
Status CheckMountSources(const std::vector<SandboxMount>& mounts);

// "<proc>/self/fd/<fd>": where mount(2) finds the object `fd` was opened on
// (the magic link names the descriptor's own mount and dentry, so what was
// checked is what is bound). `proc` is a mounted /proc of the caller's PID
// namespace.
std::string DescriptorPath(const std::string& proc, int fd);

}  // namespace dolsot
