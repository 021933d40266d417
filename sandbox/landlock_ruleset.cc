// Landlock through its raw system calls (no library), for every ABI up to 7.
#include "sandbox/landlock_ruleset.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/unique_fd.h"

namespace dolsot {
namespace {

// The constants of later ABIs, for older kernel headers.
constexpr std::uint64_t kExecute = 1ULL << 0, kWriteFile = 1ULL << 1, kReadFile = 1ULL << 2,
                        kReadDir = 1ULL << 3, kRemoveDir = 1ULL << 4, kRemoveFile = 1ULL << 5,
                        kMakeChar = 1ULL << 6, kMakeDir = 1ULL << 7, kMakeReg = 1ULL << 8,
                        kMakeSock = 1ULL << 9, kMakeFifo = 1ULL << 10, kMakeBlock = 1ULL << 11,
                        kMakeSym = 1ULL << 12, kRefer = 1ULL << 13, kTruncate = 1ULL << 14,
                        kIoctlDev = 1ULL << 15;
constexpr std::uint64_t kNetBindTcp = 1ULL << 0, kNetConnectTcp = 1ULL << 1;
constexpr std::uint64_t kScopeAbstractUnix = 1ULL << 0, kScopeSignal = 1ULL << 1;

// The ABI 6 ruleset attribute, laid out as the kernel reads it.
struct RulesetAttr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;
  std::uint64_t scoped;
};
struct PathBeneathAttr {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
} __attribute__((packed));

constexpr int kRulePathBeneath = 1;
constexpr unsigned kCreateRulesetVersion = 1U << 0;

std::uint64_t HandledFs(int abi) {
  std::uint64_t all = kExecute | kWriteFile | kReadFile | kReadDir | kRemoveDir | kRemoveFile |
                      kMakeChar | kMakeDir | kMakeReg | kMakeSock | kMakeFifo | kMakeBlock |
                      kMakeSym;
  if (abi >= 2) all |= kRefer;
  if (abi >= 3) all |= kTruncate;
  if (abi >= 5) all |= kIoctlDev;
  return all;
}

Status AddPath(int ruleset, const std::string& path, std::uint64_t access, std::uint64_t handled) {
  UniqueFd fd(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!fd) return Status::Ok();  // missing: nothing to allow
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Status::Ok();
  if (!S_ISDIR(st.st_mode)) {
    // A file takes only file rights.
    access &= kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;
  }
  PathBeneathAttr attr{access & handled, fd.get()};
  if (::syscall(SYS_landlock_add_rule, ruleset, kRulePathBeneath, &attr, 0) != 0) {
    return Status(ErrorCode::kUnavailable,
                  "landlock_add_rule(" + path + "): " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

int LandlockAbi() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

std::string LandlockSummary(int abi, bool network) {
  std::string summary = "ABI " + std::to_string(abi) + ": filesystem by path";
  if (abi >= 4) summary += network ? ", TCP allowed" : ", no TCP bind/connect";
  if (abi >= 6) summary += ", abstract unix sockets and signals scoped to the domain";
  return summary;
}

Status ApplyLandlock(const LandlockPaths& paths, std::string* summary) {
  int abi = LandlockAbi();
  if (abi <= 0) {
    return Status(ErrorCode::kUnavailable,
                  "Landlock is not available (a kernel >= 5.13 with CONFIG_SECURITY_LANDLOCK and "
                  "'landlock' in the lsm= boot parameter)");
  }
  RulesetAttr attr{};
  attr.handled_access_fs = HandledFs(abi);
  std::size_t size = sizeof(std::uint64_t);  // ABI 1-3: fs only
  if (abi >= 4 && !paths.network) {
    attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
    size = 2 * sizeof(std::uint64_t);
  }
  if (abi >= 6) {
    attr.scoped = kScopeAbstractUnix | kScopeSignal;
    size = sizeof(RulesetAttr);
  }
  UniqueFd ruleset(static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, size, 0)));
  if (!ruleset) {
    return Status(ErrorCode::kUnavailable,
                  std::string("landlock_create_ruleset: ") + std::strerror(errno));
  }
  const std::uint64_t read = kExecute | kReadFile | kReadDir;
  const std::uint64_t write = HandledFs(abi) & ~(kMakeChar | kMakeBlock | kIoctlDev);
  for (const auto& p : paths.read_only) {
    DOLSOT_RETURN_IF_ERROR(AddPath(ruleset.get(), p, read, attr.handled_access_fs));
  }
  for (const auto& p : paths.read_write) {
    DOLSOT_RETURN_IF_ERROR(AddPath(ruleset.get(), p, write, attr.handled_access_fs));
  }
  for (const auto& p : paths.list_only) {
    DOLSOT_RETURN_IF_ERROR(AddPath(ruleset.get(), p, kReadDir, attr.handled_access_fs));
  }
  for (const auto& p : paths.devices) {
    DOLSOT_RETURN_IF_ERROR(AddPath(ruleset.get(), p, kReadFile | kWriteFile | kIoctlDev,
                                   attr.handled_access_fs));
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return Status(ErrorCode::kUnavailable, std::string("no_new_privs: ") + std::strerror(errno));
  }
  if (::syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0) {
    return Status(ErrorCode::kUnavailable,
                  std::string("landlock_restrict_self: ") + std::strerror(errno));
  }
  if (summary != nullptr) *summary = LandlockSummary(abi, paths.network);
  return Status::Ok();
}

}  // namespace dolsot
