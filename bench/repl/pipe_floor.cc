// The floor under any cell round trip: 64 bytes to a live process over a
// pipe and back. Prints {"p50_us": .., "p99_us": ..} for bench_repl.py.
// With a second argument `socket`: over a unix stream socket pair instead
// (what a cell's tool socket was before its two pipes), for
// bench/tools/bench_tools.py.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 20000;
  const bool socket = argc > 2 && std::strcmp(argv[2], "socket") == 0;
  int to_child[2], to_parent[2];
  if (socket) {
    // One socket pair carries both ways: the parent's end as to_child[1]
    // and to_parent[0], the child's as to_child[0] and to_parent[1].
    int ends[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, ends) != 0) return 1;
    to_child[1] = ends[0];
    to_parent[0] = ::dup(ends[0]);
    to_child[0] = ends[1];
    to_parent[1] = ::dup(ends[1]);
  } else if (::pipe(to_child) != 0 || ::pipe(to_parent) != 0) {
    return 1;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(to_child[1]);
    ::close(to_parent[0]);
    char buf[64];
    while (::read(to_child[0], buf, sizeof buf) == sizeof buf) {
      if (::write(to_parent[1], buf, sizeof buf) != sizeof buf) break;
    }
    ::_exit(0);
  }
  ::close(to_child[0]);
  ::close(to_parent[1]);
  char buf[64] = {};
  std::vector<double> us;
  us.reserve(rounds);
  for (int i = 0; i < rounds; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (::write(to_child[1], buf, sizeof buf) != sizeof buf) return 1;
    if (::read(to_parent[0], buf, sizeof buf) != sizeof buf) return 1;
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  ::close(to_child[1]);
  ::close(to_parent[0]);  // (a socket: the child reads EOF once both are closed)
  ::waitpid(pid, nullptr, 0);
  std::sort(us.begin(), us.end());
  std::printf("{\"p50_us\": %.2f, \"p99_us\": %.2f}\n", us[us.size() / 2], us[us.size() * 99 / 100]);
  return 0;
}
