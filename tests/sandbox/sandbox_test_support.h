// What the Sandbox's kernel tests share: InChild runs a test's body in a
// forked child (a sandbox's layers are for good once applied) and returns
// what the body wrote; UsrOnlySetup is a sandbox showing /usr alone.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "sandbox/sandbox_setup.h"

namespace dolsot {

// Runs `body` in a forked child and returns what it wrote to the pipe.
template <typename Body>
std::string InChild(Body body) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string out = body();
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return text;
}

// A setup showing /usr read-only and nothing else, without the memory cap
// (gtest's own address space is not the point of these tests).
inline SandboxSetup UsrOnlySetup() {
  SandboxSetup setup;
  setup.policy.memory_mb = 0;
  setup.plan = {{MountOpKind::kBindReadOnly, "/usr", "/usr", false}};
  return setup;
}

}  // namespace dolsot
