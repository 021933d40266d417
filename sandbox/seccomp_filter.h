// SeccompFilter: the sandbox's system-call filter, a classic BPF program
// written here (no libseccomp): the architecture is checked first (another
// ABI's numbers, x32 included, are killed), then dangerous calls fail with
// EPERM, clone with namespace flags fails, clone3 answers ENOSYS (its flags
// sit in memory the filter cannot read, so libc falls back to clone), and
// ioctl TIOCSTI/TIOCLINUX fail. Everything else is allowed.
#pragma once

#include <linux/filter.h>

#include <string>
#include <vector>

#include "core/status.h"

namespace dolsot {

struct SeccompOptions {
  // Also refuse socket(AF_INET/AF_INET6/AF_PACKET) when the network is off
  // (the empty network namespace already leaves them nowhere to go).
  bool deny_inet_sockets = true;
  // The worker's own filter: mount, umount2, unshare and Landlock's calls
  // stay allowed, so that each session's keeper can put up its walls
  // (session_walls.h) before it installs the full filter.
  bool allow_session_setup = false;
};

// The system calls the filter refuses with EPERM on this architecture, by name.
std::vector<std::string> SeccompDeniedNames();

// Those the worker's filter (allow_session_setup) leaves to the keepers' own.
std::vector<std::string> SeccompSessionSetupNames();

// The BPF program. Never fails: it only encodes constants.
std::vector<sock_filter> BuildSeccompFilter(const SeccompOptions& options);

// Sets no_new_privs and installs `program` on the calling thread (and the
// threads it starts after; TSYNC when other threads exist already).
Status InstallSeccompFilter(const std::vector<sock_filter>& program);

// The AUDIT_ARCH_* value the filter expects (this build's architecture).
unsigned int SeccompArchitecture();

}  // namespace dolsot
