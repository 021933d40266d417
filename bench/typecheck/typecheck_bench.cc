// Benchmark: the type gate's added latency per cell on cells using
// examples/toolbox/mytools, p50/p99: through a warm `ty server` (TyServer),
// and the first cell of a fresh TyServer (which starts ty), interleaved with
// a peer measured in the same run: a bare `ty --version` (what starting ty
// costs). Usage: typecheck_bench [ty-binary] [rounds]; the binary defaults
// to DOLSOT_TY_BIN, else `ty`.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "typecheck/ty_server.h"

namespace {

using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double Percentile(std::vector<double> samples, double p) {
  std::sort(samples.begin(), samples.end());
  std::size_t index = static_cast<std::size_t>(p * static_cast<double>(samples.size() - 1) + 0.5);
  return samples[index];
}

// Wall time of `ty --version`, in ms (a fork/exec/wait of the same binary).
double TimeBareTy(const std::string& ty) {
  Clock::time_point start = Clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    freopen("/dev/null", "w", stdout);
    execl(ty.c_str(), ty.c_str(), "--version", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return MillisSince(start);
}

const char* const kCells[] = {
    "rows = mt.load('orders')\nbest = mt.top(rows, 2)\nmt.total(best, 'price')\n",
    "mt.add(1, '2')\n",
    "for row in rows:\n    print(row['item'], mt.add(row['qty'], 1))\n",
    "mt.top(rows, n='3')\n",
};
constexpr std::size_t kRejectedPerRound = 2;  // the second and fourth cells

dolsot::TypeCheckRequest Request(const char* cell, const std::string& ty) {
  dolsot::TypeCheckRequest request;
  request.code = cell;
  request.toolboxes = {{"mt", "mytools"}};
  request.session_names = {"rows", "best"};
  request.python_path = {DOLSOT_EXAMPLE_TOOLBOX_DIR};
  request.ty_bin = ty;
  request.deadline = Clock::now() + std::chrono::seconds(20);
  return request;
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("DOLSOT_TY_BIN");
  std::string ty = argc > 1 ? argv[1] : (env && *env ? env : "ty");
  int rounds = argc > 2 ? std::atoi(argv[2]) : 40;
  std::vector<double> warm;
  std::vector<double> cold;
  std::vector<double> bare;
  std::size_t rejected = 0;
  dolsot::TyServer server;
  for (int i = 0; i < rounds; ++i) {
    {
      dolsot::TyServer fresh;  // its first cell starts ty
      Clock::time_point start = Clock::now();
      dolsot::TypeCheckOutcome out = fresh.Check(Request(kCells[1], ty));
      cold.push_back(MillisSince(start));
      if (!out.ran || out.diagnostics.size() != 1) {
        std::fprintf(stderr, "a fresh server gave no verdict: %s\n", out.note.c_str());
        return 1;
      }
    }
    for (const char* cell : kCells) {
      dolsot::TypeCheckRequest request = Request(cell, ty);
      Clock::time_point start = Clock::now();
      dolsot::TypeCheckOutcome out = server.Check(request);
      double ms = MillisSince(start);
      if (!out.ran) {
        std::fprintf(stderr, "the gate did not run: %s\n", out.note.c_str());
        return 1;
      }
      if (i > 0 || cell != kCells[0]) warm.push_back(ms);  // the very first started ty
      rejected += out.diagnostics.empty() ? 0 : 1;
      bare.push_back(TimeBareTy(ty));
    }
  }
  if (rejected != kRejectedPerRound * static_cast<std::size_t>(rounds)) {
    std::fprintf(stderr, "unexpected verdicts: %zu cells rejected\n", rejected);
    return 1;
  }
  double bare_p50 = Percentile(bare, 0.5);
  std::printf("cells checked: %zu warm (%zu rejected) + %zu cold, ty: %s\n", warm.size() + 1,
              rejected, cold.size(), ty.c_str());
  std::printf("warm ty server per cell: p50 %.2f ms, p99 %.2f ms\n", Percentile(warm, 0.5),
              Percentile(warm, 0.99));
  std::printf("first cell of a fresh TyServer (starts ty): p50 %.1f ms, p99 %.1f ms\n",
              Percentile(cold, 0.5), Percentile(cold, 0.99));
  std::printf("peer, bare `ty --version`: p50 %.1f ms, p99 %.1f ms\n", bare_p50,
              Percentile(bare, 0.99));
  std::printf("ratio warm/bare p50: %.3f, cold/bare p50: %.2f\n", Percentile(warm, 0.5) / bare_p50,
              Percentile(cold, 0.5) / bare_p50);
  return 0;
}
