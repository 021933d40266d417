// The seccomp-bpf program of the sandbox, built instruction by instruction.
#include "sandbox/seccomp_filter.h"

#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dolsot {
namespace {

#if defined(__x86_64__)
constexpr unsigned int kArch = AUDIT_ARCH_X86_64;
constexpr unsigned int kX32Bit = 0x40000000;
#elif defined(__aarch64__)
constexpr unsigned int kArch = AUDIT_ARCH_AARCH64;
constexpr unsigned int kX32Bit = 0;
#else
#error "the sandbox's seccomp filter knows x86_64 and aarch64"
#endif

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

struct Denied {
  long nr;
  const char* name;
};

#define DENY(name) Denied{__NR_##name, #name}
// Every call here fails with EPERM.
const Denied kDenied[] = {
    DENY(ptrace), DENY(process_vm_writev), DENY(mount), DENY(umount2), DENY(unshare),
    DENY(setns), DENY(pivot_root), DENY(chroot), DENY(bpf), DENY(perf_event_open),
    DENY(keyctl), DENY(add_key), DENY(request_key), DENY(userfaultfd), DENY(io_uring_setup),
    DENY(io_uring_enter), DENY(io_uring_register), DENY(kexec_load), DENY(kexec_file_load),
    DENY(init_module), DENY(finit_module), DENY(delete_module), DENY(open_by_handle_at),
    DENY(name_to_handle_at), DENY(pidfd_getfd), DENY(pidfd_send_signal), DENY(fsopen),
    DENY(fsconfig), DENY(fsmount), DENY(fspick), DENY(move_mount), DENY(open_tree),
    DENY(mount_setattr), DENY(reboot), DENY(swapon), DENY(swapoff), DENY(acct),
    DENY(syslog), DENY(quotactl), DENY(settimeofday), DENY(clock_settime), DENY(clock_adjtime),
    DENY(adjtimex), DENY(vhangup), DENY(lookup_dcookie), DENY(fanotify_init),
    DENY(landlock_create_ruleset), DENY(landlock_add_rule), DENY(landlock_restrict_self),
#if defined(__x86_64__)
    DENY(iopl), DENY(ioperm), DENY(uselib), DENY(_sysctl), DENY(create_module),
    DENY(get_kernel_syms), DENY(query_module), DENY(nfsservctl),
#endif
};

// Left allowed by the worker's filter (SeccompOptions::allow_session_setup).
const Denied kSessionSetup[] = {
    DENY(mount), DENY(umount2), DENY(unshare), DENY(landlock_create_ruleset),
    DENY(landlock_add_rule), DENY(landlock_restrict_self),
};
#undef DENY

bool IsSessionSetup(long nr) {
  for (const Denied& d : kSessionSetup) {
    if (d.nr == nr) return true;
  }
  return false;
}

constexpr unsigned int kNamespaceFlags = CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID |
                                         CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                                         CLONE_NEWCGROUP | CLONE_NEWTIME;

sock_filter Stmt(unsigned short code, unsigned int k) { return BPF_STMT(code, k); }
sock_filter Jump(unsigned short code, unsigned int k, unsigned char jt, unsigned char jf) {
  return BPF_JUMP(code, k, jt, jf);
}

constexpr unsigned int kErrno(int e) { return SECCOMP_RET_ERRNO | (static_cast<unsigned>(e) & SECCOMP_RET_DATA); }

// Low 32 bits of argument `n` (the filter sees 64-bit args as two words).
constexpr unsigned int ArgLow(int n) {
  return static_cast<unsigned int>(offsetof(seccomp_data, args) + 8 * n);
}

}  // namespace

unsigned int SeccompArchitecture() { return kArch; }

std::vector<std::string> SeccompDeniedNames() {
  std::vector<std::string> out;
  for (const Denied& d : kDenied) out.emplace_back(d.name);
  return out;
}

std::vector<std::string> SeccompSessionSetupNames() {
  std::vector<std::string> out;
  for (const Denied& d : kSessionSetup) out.emplace_back(d.name);
  return out;
}

std::vector<sock_filter> BuildSeccompFilter(const SeccompOptions& options) {
  std::vector<sock_filter> p;
  // 1. The architecture: another one's numbers mean other calls.
  p.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0));
  p.push_back(Stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  p.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  if (kX32Bit != 0) {  // x32 calls (nr | 0x40000000) on x86_64
    p.push_back(Jump(BPF_JMP | BPF_JGE | BPF_K, kX32Bit, 0, 1));
    p.push_back(Stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  }
  // 2. Denied calls: EPERM.
  for (const Denied& d : kDenied) {
    if (options.allow_session_setup && IsSessionSetup(d.nr)) continue;
    p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned int>(d.nr), 0, 1));
    p.push_back(Stmt(BPF_RET | BPF_K, kErrno(EPERM)));
  }
  // 3. clone3: ENOSYS (libc falls back to clone, whose flags are checked).
  p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1));
  p.push_back(Stmt(BPF_RET | BPF_K, kErrno(ENOSYS)));
  // 4. clone with a namespace flag: EPERM. (x86_64 and aarch64: flags are arg 0.)
  p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4));
  p.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, ArgLow(0)));
  p.push_back(Jump(BPF_JMP | BPF_JSET | BPF_K, kNamespaceFlags, 0, 1));
  p.push_back(Stmt(BPF_RET | BPF_K, kErrno(EPERM)));
  p.push_back(Stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  // 5. ioctl TIOCSTI / TIOCLINUX (request is arg 1; compared on its low word).
  p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 5));
  p.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, ArgLow(1)));
  p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 2, 0));
  p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 1, 0));
  p.push_back(Stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  p.push_back(Stmt(BPF_RET | BPF_K, kErrno(EPERM)));
  // 6. socket(AF_INET / AF_INET6 / AF_PACKET) with the network off.
  if (options.deny_inet_sockets) {
    p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 6));
    p.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, ArgLow(0)));
    p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 3, 0));
    p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 2, 0));
    p.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, AF_PACKET, 1, 0));
    p.push_back(Stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    p.push_back(Stmt(BPF_RET | BPF_K, kErrno(EACCES)));
  }
  p.push_back(Stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  return p;
}

Status InstallSeccompFilter(const std::vector<sock_filter>& program) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return Status(ErrorCode::kUnavailable,
                  std::string("prctl(PR_SET_NO_NEW_PRIVS): ") + std::strerror(errno));
  }
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(program.size());
  prog.filter = const_cast<sock_filter*>(program.data());
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0) {
    return Status(ErrorCode::kUnavailable,
                  std::string("seccomp(SECCOMP_SET_MODE_FILTER): ") + std::strerror(errno) +
                      " (a kernel built without CONFIG_SECCOMP_FILTER?)");
  }
  return Status::Ok();
}

}  // namespace dolsot
