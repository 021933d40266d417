// The seccomp program, run through a classic-BPF interpreter written here on
// seccomp_data records: what each call gets, on this and on other ABIs.
#include "sandbox/seccomp_filter.h"

#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstring>

namespace dolsot {
namespace {

// Runs `program` on `data` as the kernel would (the subset the builder uses).
unsigned int RunFilter(const std::vector<sock_filter>& program, const seccomp_data& data) {
  unsigned int a = 0;
  std::size_t pc = 0;
  unsigned char bytes[sizeof(seccomp_data)];
  std::memcpy(bytes, &data, sizeof data);
  while (pc < program.size()) {
    const sock_filter& f = program[pc];
    switch (f.code) {
      case BPF_LD | BPF_W | BPF_ABS:
        EXPECT_LE(f.k + 4, sizeof bytes);
        std::memcpy(&a, bytes + f.k, 4);
        ++pc;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K: pc += 1 + (a == f.k ? f.jt : f.jf); break;
      case BPF_JMP | BPF_JGE | BPF_K: pc += 1 + (a >= f.k ? f.jt : f.jf); break;
      case BPF_JMP | BPF_JSET | BPF_K: pc += 1 + ((a & f.k) ? f.jt : f.jf); break;
      case BPF_RET | BPF_K: return f.k;
      default: ADD_FAILURE() << "unexpected opcode " << f.code; return 0;
    }
  }
  ADD_FAILURE() << "fell off the end of the program";
  return 0;
}

seccomp_data Call(long nr, std::uint64_t arg0 = 0, std::uint64_t arg1 = 0,
                  unsigned int arch = SeccompArchitecture()) {
  seccomp_data d{};
  d.nr = static_cast<int>(nr);
  d.arch = arch;
  d.args[0] = arg0;
  d.args[1] = arg1;
  return d;
}

constexpr unsigned int Errno(int e) { return SECCOMP_RET_ERRNO | static_cast<unsigned>(e); }

class SeccompFilter : public ::testing::Test {
 protected:
  std::vector<sock_filter> program = BuildSeccompFilter(SeccompOptions{});
};

TEST_F(SeccompFilter, FitsTheKernelsLimit) { EXPECT_LT(program.size(), 4096u); }

TEST_F(SeccompFilter, KillsAnotherArchitecture) {
  EXPECT_EQ(RunFilter(program, Call(__NR_getpid, 0, 0, AUDIT_ARCH_I386)), SECCOMP_RET_KILL_PROCESS);
#if defined(__x86_64__)
  EXPECT_EQ(RunFilter(program, Call(__NR_getpid | 0x40000000)), SECCOMP_RET_KILL_PROCESS);  // x32
#endif
}

TEST_F(SeccompFilter, RefusesTheDangerousCalls) {
  for (long nr : {__NR_ptrace, __NR_mount, __NR_umount2, __NR_unshare, __NR_setns,
                  __NR_pivot_root, __NR_bpf, __NR_perf_event_open, __NR_keyctl, __NR_add_key,
                  __NR_userfaultfd, __NR_io_uring_setup, __NR_kexec_load, __NR_init_module,
                  __NR_finit_module, __NR_delete_module, __NR_open_by_handle_at,
                  __NR_pidfd_getfd, __NR_pidfd_send_signal, __NR_process_vm_writev}) {
    EXPECT_EQ(RunFilter(program, Call(nr)), Errno(EPERM)) << "syscall " << nr;
  }
  EXPECT_GE(SeccompDeniedNames().size(), 20u);
}

TEST_F(SeccompFilter, AllowsWhatPythonDoes) {
  for (long nr : {__NR_read, __NR_write, __NR_openat, __NR_mmap, __NR_getpid, __NR_kill,
                  __NR_wait4, __NR_process_vm_readv, __NR_futex, __NR_execve}) {
    EXPECT_EQ(RunFilter(program, Call(nr)), SECCOMP_RET_ALLOW) << "syscall " << nr;
  }
  EXPECT_EQ(RunFilter(program, Call(__NR_socket, AF_UNIX)), SECCOMP_RET_ALLOW);
  EXPECT_EQ(RunFilter(program, Call(__NR_ioctl, 1, TCGETS)), SECCOMP_RET_ALLOW);
}

TEST_F(SeccompFilter, ChecksCloneFlagsAndTurnsClone3Away) {
  EXPECT_EQ(RunFilter(program, Call(__NR_clone, SIGCHLD)), SECCOMP_RET_ALLOW);
  EXPECT_EQ(RunFilter(program, Call(__NR_clone, CLONE_VM | CLONE_THREAD | CLONE_SIGHAND)),
            SECCOMP_RET_ALLOW);
  for (unsigned long flag : {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET}) {
    EXPECT_EQ(RunFilter(program, Call(__NR_clone, SIGCHLD | flag)), Errno(EPERM)) << flag;
  }
  EXPECT_EQ(RunFilter(program, Call(__NR_clone3)), Errno(ENOSYS));
}

TEST_F(SeccompFilter, RefusesTerminalInjection) {
  EXPECT_EQ(RunFilter(program, Call(__NR_ioctl, 0, TIOCSTI)), Errno(EPERM));
  // The request's high word does not hide it: the filter compares the low one.
  EXPECT_EQ(RunFilter(program, Call(__NR_ioctl, 0, (1ULL << 32) | TIOCSTI)), Errno(EPERM));
}

TEST_F(SeccompFilter, InetSocketsOnlyWithTheNetwork) {
  EXPECT_EQ(RunFilter(program, Call(__NR_socket, AF_INET)), Errno(EACCES));
  EXPECT_EQ(RunFilter(program, Call(__NR_socket, AF_INET6)), Errno(EACCES));
  EXPECT_EQ(RunFilter(program, Call(__NR_socket, AF_PACKET)), Errno(EACCES));
  SeccompOptions open;
  open.deny_inet_sockets = false;
  EXPECT_EQ(RunFilter(BuildSeccompFilter(open), Call(__NR_socket, AF_INET)), SECCOMP_RET_ALLOW);
}

TEST_F(SeccompFilter, TheWorkersFilterLeavesTheKeepersSetupToThem) {
  SeccompOptions worker;
  worker.allow_session_setup = true;
  std::vector<sock_filter> its = BuildSeccompFilter(worker);
  for (long nr : {__NR_mount, __NR_umount2, __NR_unshare, __NR_landlock_create_ruleset,
                  __NR_landlock_add_rule, __NR_landlock_restrict_self}) {
    EXPECT_EQ(RunFilter(its, Call(nr)), SECCOMP_RET_ALLOW) << "syscall " << nr;
    EXPECT_EQ(RunFilter(program, Call(nr)), Errno(EPERM)) << "syscall " << nr;
  }
  EXPECT_EQ(SeccompSessionSetupNames().size(), 6u);
  // Everything else stays refused, namespace clones too.
  for (long nr : {__NR_ptrace, __NR_setns, __NR_pivot_root, __NR_bpf, __NR_pidfd_send_signal,
                  __NR_process_vm_writev, __NR_mount_setattr, __NR_fsopen}) {
    EXPECT_EQ(RunFilter(its, Call(nr)), Errno(EPERM)) << "syscall " << nr;
  }
  EXPECT_EQ(RunFilter(its, Call(__NR_clone, SIGCHLD | CLONE_NEWUSER)), Errno(EPERM));
}

}  // namespace
}  // namespace dolsot
