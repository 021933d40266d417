// FileStore with deferred durability (the dolsot server's store, whose save
// returns before the fsync) against the floor of one write + fsync of the
// same bytes into a file of the same directory, in one run, interleaved.
//
//   build/bench/store/file_store_bench [--mb 100] [--rounds 9]
//
// Per size: the time until Save returns (what a sync checkpoint's Result
// waits for), and the CPU of Save + Flush (this process: the saving thread
// and the flusher), medians, and their ratios against the floor.
#include <sys/resource.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/file_store.h"

namespace {

double CpuSeconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Sample {
  double returned_ms = 0;
  double cpu_ms = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::size_t mb = 100;
  int rounds = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--mb") == 0) mb = std::strtoul(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
  }
  char pattern[] = "/tmp/file-store-bench-XXXXXX";
  const char* root = ::mkdtemp(pattern);
  if (root == nullptr) return 1;
  const std::string dir = std::string(root) + "/sessions";
  dolsot::FileStoreOptions options;
  options.defer_durability = true;
  auto store = dolsot::FileStore::Open(dir, 7, options);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  std::string blob(mb << 20, 'x');
  for (std::size_t i = 0; i < blob.size(); i += 4096) blob[i] = static_cast<char>(i >> 12);
  std::vector<double> store_returned, store_cpu, floor_returned, floor_cpu;
  for (int round = 0; round < rounds; ++round) {
    double c0 = CpuSeconds();
    auto t0 = std::chrono::steady_clock::now();
    if (!(*store)->Save("s", blob).ok()) return 2;
    auto t1 = std::chrono::steady_clock::now();
    if (!(*store)->Flush().ok()) return 3;
    store_cpu.push_back((CpuSeconds() - c0) * 1e3);
    store_returned.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    const std::string path = dir + "/floor";
    c0 = CpuSeconds();
    t0 = std::chrono::steady_clock::now();
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return 4;
    for (std::size_t done = 0; done < blob.size();) {
      ssize_t n = ::write(fd, blob.data() + done, blob.size() - done);
      if (n <= 0) return 5;
      done += static_cast<std::size_t>(n);
    }
    ::fsync(fd);
    ::close(fd);
    t1 = std::chrono::steady_clock::now();
    floor_cpu.push_back((CpuSeconds() - c0) * 1e3);
    floor_returned.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    ::unlink(path.c_str());
  }
  (void)(*store)->Delete("s");
  store->reset();
  ::rmdir(dir.c_str());
  ::rmdir(root);
  const double fr = Median(floor_returned), fc = Median(floor_cpu);
  const double sr = Median(store_returned), sc = Median(store_cpu);
  std::printf("| %zu MB, %d rounds | until it returns | CPU (save + flush) |\n", mb, rounds);
  std::printf("|---|--:|--:|\n");
  std::printf("| write + fsync (floor) | %.1f ms | %.1f ms |\n", fr, fc);
  std::printf("| FileStore, deferred durability | %.1f ms (%.2fx) | %.1f ms (%.2fx) |\n", sr, sr / fr,
              sc, sc / fc);
  return 0;
}
