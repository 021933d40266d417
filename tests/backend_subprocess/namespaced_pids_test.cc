// NSpid and children lists: the host's translation of a sandboxed worker's
// pids, checked against a child in a PID namespace of its own (root: a
// plain unshare; else a user namespace first).
#include "backend_subprocess/namespaced_pids.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

namespace dolsot {
namespace {

TEST(NamespacedPids, OutsideANamespaceThePidIsItsOwn) {
  EXPECT_EQ(InnermostPid(::getpid()), ::getpid());
  EXPECT_EQ(InnermostPid(0x3ffffff), std::nullopt);  // no such process
}

TEST(NamespacedPids, FindsAChildByThePidItsNamespaceGivesIt) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t middle = ::fork();
  if (middle == 0) {
    // A new PID namespace for the children of this process.
    if (::unshare(CLONE_NEWPID) != 0 &&
        (::unshare(CLONE_NEWUSER) != 0 || ::unshare(CLONE_NEWPID) != 0)) {
      ::_exit(3);
    }
    pid_t inner = ::fork();  // pid 1 there
    if (inner == 0) {
      pid_t grandchild = ::fork();  // pid 2 there
      if (grandchild == 0) {
        ::pause();
        ::_exit(0);
      }
      char byte = 1;
      (void)!::write(ready[1], &byte, 1);
      ::pause();
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(inner, &status, 0);
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "no PID namespace here";
  ::close(ready[0]);
  std::vector<pid_t> children = ChildPids(middle);
  ASSERT_EQ(children.size(), 1u);
  pid_t inner = children[0];
  EXPECT_EQ(InnermostPid(inner), 1);
  std::optional<pid_t> grandchild = DescendantByInnermostPid(middle, 2, 2);
  ASSERT_TRUE(grandchild.has_value());
  EXPECT_NE(*grandchild, 2);
  std::vector<pid_t> under_inner = ChildPids(inner);
  EXPECT_NE(std::find(under_inner.begin(), under_inner.end(), *grandchild), under_inner.end());
  EXPECT_EQ(DescendantByInnermostPid(middle, 2, 1), std::nullopt);  // one generation is not enough
  EXPECT_EQ(DescendantByInnermostPid(middle, 7, 2), std::nullopt);
  ::kill(inner, SIGKILL);  // pid 1: its namespace goes with it
  int status = 0;
  ::waitpid(middle, &status, 0);
}

}  // namespace
}  // namespace dolsot
