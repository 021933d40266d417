// LandlockRuleset: the sandbox's second filesystem wall (and, from ABI 4, a
// TCP wall; from ABI 6, abstract unix sockets and signals scoped to the
// sandbox). Applied after the mount namespace is built, it restricts what
// the worker and every process it forks may open, by path hierarchy.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace dolsot {

struct LandlockPaths {
  std::vector<std::string> read_only;    // read and execute
  std::vector<std::string> read_write;   // everything but device nodes
  std::vector<std::string> devices;      // read, write, ioctl (device files)
  std::vector<std::string> list_only;    // directories listed (and below), nothing read
  bool network = false;                  // false: no TCP bind/connect (ABI 4+)
};

// The ABI the kernel offers: 0 when Landlock is absent or disabled.
int LandlockAbi();

// What ApplyLandlock walls off with this ABI, in words (for the report).
std::string LandlockSummary(int abi, bool network);

// Creates the ruleset, adds `paths` (missing ones are skipped), and
// restricts the calling thread (no_new_privs must be set, or the caller
// must hold CAP_SYS_ADMIN). On success `summary` says what was handled.
Status ApplyLandlock(const LandlockPaths& paths, std::string* summary);

}  // namespace dolsot
