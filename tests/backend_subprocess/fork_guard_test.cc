// ForkGuard: a guarded descriptor is closed in the child of a plain fork (as
// a cell's os.fork makes), kept in the child of an engine fork, and no longer
// closed once released or taken out of its GuardedFd; only a plain fork's
// child counts as a cell's child. Any number of descriptors (to the limit)
// is guarded; beyond it, GuardedFd::Create fails and closes the descriptor.
#include "backend_subprocess/fork_guard.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <vector>

namespace dolsot::fork_guard {
namespace {

UniqueFd OpenNull() { return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

GuardedFd MustGuard(UniqueFd fd) {
  auto guarded = GuardedFd::Create(std::move(fd));
  EXPECT_TRUE(guarded.ok()) << guarded.status().ToString();
  return guarded.ok() ? std::move(guarded).value() : GuardedFd();
}

bool Open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

// Forks (inside an EngineFork scope when `engine`); the child exits 0 when
// `in_child()` holds there, 1 when not.
template <typename Check>
int HoldsInChild(bool engine, Check in_child) {
  pid_t pid;
  if (engine) {
    EngineFork scope;
    pid = ::fork();
  } else {
    pid = ::fork();
  }
  if (pid == 0) ::_exit(in_child() ? 0 : 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

// 0 when `fd` is open in the child, 1 when closed.
int OpenInChild(int fd, bool engine) {
  return HoldsInChild(engine, [fd] { return Open(fd); });
}

TEST(ForkGuard, AGuardedDescriptorIsClosedInAPlainForksChildOnly) {
  GuardedFd fd = MustGuard(OpenNull());
  ASSERT_TRUE(fd);
  EXPECT_TRUE(Guarded(fd.get()));
  EXPECT_EQ(OpenInChild(fd.get(), /*engine=*/false), 1);
  EXPECT_EQ(OpenInChild(fd.get(), /*engine=*/true), 0);
  EXPECT_TRUE(Open(fd.get()));  // the parent keeps it
}

// 0 when the child counts as a cell's child, 1 when not.
int CellChildInChild(bool engine) {
  GuardedFd installs_the_handler = MustGuard(OpenNull());
  return HoldsInChild(engine, [] { return InCellChild(); });
}

TEST(ForkGuard, OnlyAPlainForksChildCountsAsACellsChild) {
  EXPECT_EQ(CellChildInChild(/*engine=*/false), 0);
  EXPECT_EQ(CellChildInChild(/*engine=*/true), 1);
  EXPECT_FALSE(InCellChild());  // nor does the parent
}

TEST(ForkGuard, TakenOrReleasedItIsInheritedAgain) {
  GuardedFd guarded = MustGuard(OpenNull());
  UniqueFd taken = guarded.Take();
  ASSERT_TRUE(taken);
  EXPECT_FALSE(Guarded(taken.get()));
  EXPECT_EQ(OpenInChild(taken.get(), /*engine=*/false), 0);

  UniqueFd plain = OpenNull();
  ASSERT_TRUE(Guard(plain.get()).ok());
  Release(plain.get());
  EXPECT_EQ(OpenInChild(plain.get(), /*engine=*/false), 0);
}

TEST(ForkGuard, ResettingStopsGuardingBeforeClosing) {
  int number;
  {
    GuardedFd fd = MustGuard(OpenNull());
    number = fd.get();
  }
  EXPECT_FALSE(Guarded(number));
  // A later descriptor that reuses the number is not closed in children.
  UniqueFd reused = OpenNull();
  EXPECT_EQ(OpenInChild(reused.get(), /*engine=*/false), 0);
}

// The table once had eight slots, and a ninth descriptor was silently left
// unguarded: open in every process a cell forked.
TEST(ForkGuard, ManyDescriptorsAreAllClosedInAPlainForksChild) {
  std::vector<GuardedFd> held;
  std::vector<int> numbers;
  for (int i = 0; i < 200; ++i) {
    held.push_back(MustGuard(OpenNull()));
    ASSERT_TRUE(held.back());
    numbers.push_back(held.back().get());
  }
  int open_in_child = HoldsInChild(/*engine=*/false, [&numbers] {
    for (int fd : numbers) {
      if (Open(fd)) return true;
    }
    return false;
  });
  EXPECT_EQ(open_in_child, 1);  // none was open
  held.clear();
  for (int fd : numbers) EXPECT_FALSE(Guarded(fd));
}

TEST(ForkGuard, BeyondItsLimitADescriptorIsRefusedAndClosed) {
  UniqueFd filler = OpenNull();
  for (int i = 0; i < kMaxGuarded; ++i) ASSERT_TRUE(Guard(filler.get()).ok()) << i;
  UniqueFd extra = OpenNull();
  int number = extra.get();
  auto refused = GuardedFd::Create(std::move(extra));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("guarded already"), std::string::npos);
  EXPECT_FALSE(Open(number));  // closed, so no fork can inherit it
  EXPECT_FALSE(Guard(OpenNull().get()).ok());
  Release(filler.get());  // every slot that held it
  EXPECT_FALSE(Guarded(filler.get()));
  EXPECT_TRUE(MustGuard(OpenNull()));
}

}  // namespace
}  // namespace dolsot::fork_guard
