// Benchmark: the type gate's added latency per cell on cells using
// examples/toolbox/mytools, p50/p99, for one `ty check` per cell
// (TypeCheckCell) and a warm `ty server` (TyServer), interleaved with a peer
// measured in the same run: a bare `ty --version` (what starting ty costs).
// Usage: typecheck_bench [ty-binary] [rounds]; the binary defaults to
// DOLSOT_TY_BIN, else `ty`.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/type_gate.h"

namespace {

using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// CPU time (user + system) of every reaped child so far, in ms: robust to
// other load on the machine, unlike wall time.
double ChildCpuMillis() {
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  auto ms = [](const timeval& t) { return t.tv_sec * 1000.0 + t.tv_usec / 1000.0; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
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

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("DOLSOT_TY_BIN");
  std::string ty = argc > 1 ? argv[1] : (env && *env ? env : "ty");
  int rounds = argc > 2 ? std::atoi(argv[2]) : 40;
  std::vector<double> gate;
  std::vector<double> bare;
  std::vector<double> gate_cpu;
  std::vector<double> server;
  int rejected = 0;
  dolsot::TyServer warm;
  double server_first = -1;
  for (int i = 0; i < rounds; ++i) {
    for (const char* cell : kCells) {
      dolsot::TypeCheckRequest request;
      request.code = cell;
      request.toolboxes = {{"mt", "mytools"}};
      request.session_names = {"rows", "best"};
      request.python_path = {DOLSOT_EXAMPLE_TOOLBOX_DIR};
      request.ty_bin = ty;
      request.deadline = Clock::now() + std::chrono::seconds(20);
      double cpu_before = ChildCpuMillis();
      Clock::time_point start = Clock::now();
      dolsot::TypeCheckOutcome out = dolsot::TypeCheckCell(request);
      gate.push_back(MillisSince(start));
      gate_cpu.push_back(ChildCpuMillis() - cpu_before);
      if (!out.ran) {
        std::fprintf(stderr, "the gate did not run: %s\n", out.note.c_str());
        return 1;
      }
      rejected += out.diagnostics.empty() ? 0 : 1;
      start = Clock::now();
      dolsot::TypeCheckOutcome via_server = warm.Check(request);
      double server_ms = MillisSince(start);
      if (server_first < 0) {
        server_first = server_ms;  // starts ty server: reported on its own
      } else {
        server.push_back(server_ms);
      }
      if (!via_server.ran || via_server.diagnostics.size() != out.diagnostics.size()) {
        std::fprintf(stderr, "the server disagrees: %s\n", via_server.note.c_str());
        return 1;
      }
      bare.push_back(TimeBareTy(ty));
    }
  }
  double gate_p50 = Percentile(gate, 0.5);
  double bare_p50 = Percentile(bare, 0.5);
  std::printf("cells checked: %zu (%d rejected), ty: %s\n", gate.size(), rejected, ty.c_str());
  std::printf("one `ty check` per cell: p50 %.1f ms, p99 %.1f ms\n", gate_p50, Percentile(gate, 0.99));
  std::printf("ty's CPU time per cell (user+sys): p50 %.1f ms\n", Percentile(gate_cpu, 0.5));
  std::printf("warm ty server per cell: p50 %.2f ms, p99 %.2f ms (its first cell: %.1f ms)\n",
              Percentile(server, 0.5), Percentile(server, 0.99), server_first);
  std::printf("peer, bare `ty --version`: p50 %.1f ms, p99 %.1f ms\n", bare_p50,
              Percentile(bare, 0.99));
  std::printf("ratio one-shot/bare p50: %.2f, warm server/bare p50: %.3f\n", gate_p50 / bare_p50,
              Percentile(server, 0.5) / bare_p50);
  return 0;
}
