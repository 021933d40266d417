// HugePageArenas (embedded/huge_page_arenas.h): CPython's arenas come from
// huge-page chunks once installed; freed arenas give their memory back and
// their addresses are reused; chunks roll over; arenas from before the
// install are freed by CPython's own allocator; a forked child allocates on
// its own copy. Each test case runs in its own process (ctest), so each
// installs once. Skipped, with the reason, where THP is off.
#include "embedded/huge_page_arenas.h"

#include <gtest/gtest.h>
#include <pybind11/embed.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace py = pybind11;

namespace dolsot {
namespace {

#define SKIP_WITHOUT_THP()                                                              \
  if (!TransparentHugePagesAvailable()) {                                               \
    GTEST_SKIP() << "transparent huge pages are off on this kernel "                     \
                    "(/sys/kernel/mm/transparent_hugepage/enabled is [never])";          \
  }

// Builds `rows` small objects in __main__.data; returns the address of one.
const void* Build(const char* name, int rows) {
  py::exec(std::string(name) + " = [{'k': i, 'v': str(i)} for i in range(" + std::to_string(rows) +
           ")]");
  py::object list = py::globals()[name];
  return py::object(list[py::int_(rows - 1)]).ptr();
}

std::size_t AnonHugeKiB() {
  std::ifstream rollup("/proc/self/smaps_rollup");
  std::string word;
  while (rollup >> word) {
    if (word == "AnonHugePages:") {
      std::size_t kib = 0;
      rollup >> kib;
      return kib;
    }
  }
  return 0;
}

TEST(HugePageArenas, NewObjectsLiveInHugePageChunks) {
  SKIP_WITHOUT_THP();
  py::gil_scoped_acquire gil;
  ASSERT_TRUE(InstallHugePageArenas());
  EXPECT_TRUE(InstallHugePageArenas());  // once: the second call changes nothing
  const void* object = Build("data", 200000);
  EXPECT_TRUE(InHugePageArenas(object));
  HugePageArenaStats stats = GetHugePageArenaStats();
  EXPECT_TRUE(stats.installed);
  EXPECT_GE(stats.arenas_in_use, 20u);  // ~40 MB of dicts and strs
  EXPECT_GE(stats.chunks, 1u);
  EXPECT_EQ(stats.fallbacks, 0u);
  // The kernel backs them with huge pages (the point of it all).
  EXPECT_GT(AnonHugeKiB(), 0u);
  long long sum = py::eval("sum(d['k'] for d in data)").cast<long long>();
  EXPECT_EQ(sum, 199999LL * 200000 / 2);
}

TEST(HugePageArenas, FreedArenasAreReusedAndChunksRollOver) {
  SKIP_WITHOUT_THP();
  py::gil_scoped_acquire gil;
  ASSERT_TRUE(InstallHugePageArenas(std::size_t{4} << 20));  // a few arenas per chunk
  Build("data", 200000);
  HugePageArenaStats built = GetHugePageArenaStats();
  EXPECT_GE(built.chunks, 5u);
  py::exec("del data\nimport gc\ngc.collect()");
  HugePageArenaStats freed = GetHugePageArenaStats();
  EXPECT_GT(freed.arenas_freed, 0u);
  EXPECT_LT(freed.arenas_in_use, built.arenas_in_use);
  // Building again takes the freed arenas first: no new chunk is needed.
  const void* again = Build("data", 200000);
  EXPECT_TRUE(InHugePageArenas(again));
  HugePageArenaStats rebuilt = GetHugePageArenaStats();
  EXPECT_LE(rebuilt.chunks, built.chunks + 1);
  EXPECT_LT(rebuilt.arenas_freed, freed.arenas_freed);
  EXPECT_EQ(py::eval("sum(len(d['v']) for d in data)").cast<long>(),
            py::eval("sum(len(str(i)) for i in range(200000))").cast<long>());
}

TEST(HugePageArenas, ObjectsFromBeforeTheInstallAreFreedByCpythonsAllocator) {
  SKIP_WITHOUT_THP();
  py::gil_scoped_acquire gil;
  const void* before = Build("old", 100000);
  ASSERT_TRUE(InstallHugePageArenas());
  EXPECT_FALSE(InHugePageArenas(before));
  const void* after = Build("new", 100000);
  EXPECT_TRUE(InHugePageArenas(after));
  py::exec("del old\nimport gc\ngc.collect()");  // arenas handed back to CPython's own free
  EXPECT_EQ(py::eval("len(new)").cast<int>(), 100000);
  Build("more", 100000);
  EXPECT_EQ(py::eval("new[-1]['k'] + more[-1]['k']").cast<int>(), 2 * 99999);
}

TEST(HugePageArenas, AForkedChildAllocatesOnItsOwnCopy) {
  SKIP_WITHOUT_THP();
  py::gil_scoped_acquire gil;
  ASSERT_TRUE(InstallHugePageArenas());
  Build("data", 100000);
  const std::size_t parent_chunks = GetHugePageArenaStats().chunks;
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: allocate a lot, check values, exit without finalizing.
    const void* mine = Build("child_data", 300000);
    bool ok = InHugePageArenas(mine) &&
              py::eval("sum(d['k'] for d in data) + len(child_data)").cast<long long>() ==
                  99999LL * 100000 / 2 + 300000;
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The child's chunks were its own.
  EXPECT_EQ(GetHugePageArenaStats().chunks, parent_chunks);
  EXPECT_EQ(py::eval("len(data)").cast<int>(), 100000);
}

}  // namespace
}  // namespace dolsot
