// HotPages: finds the pages this process wrote (exclusively mapped), respects
// its size caps (total, and new pages per observation), ages pages it
// populated itself, and after a fork pre-faults
// them (they become the child's own copies); unmapped pages are skipped.
#include "backend_subprocess/hot_pages.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

namespace dolsot {
namespace {

constexpr std::size_t kPages = 64;

// A private anonymous region of kPages pages, none touched yet.
class Region {
 public:
  Region() {
    size_ = kPages * HotPages::PageSize();
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }
  ~Region() {
    if (base_ != nullptr) ::munmap(base_, size_);
  }
  char* page(std::size_t i) const { return base_ + i * HotPages::PageSize(); }
  void Write(std::size_t first, std::size_t count) const {
    for (std::size_t i = first; i < first + count; ++i) page(i)[0] = 1;
  }
  bool ok() const { return base_ != nullptr; }
  void Unmap() {
    ::munmap(base_, size_);
    base_ = nullptr;
  }

 private:
  char* base_ = nullptr;
  std::size_t size_ = 0;
};

std::uint64_t PagemapBits(const void* address) {
  int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  std::uint64_t bits = 0;
  off_t offset = static_cast<off_t>(reinterpret_cast<std::uintptr_t>(address) /
                                    HotPages::PageSize() * sizeof(bits));
  if (::pread(fd, &bits, sizeof(bits), offset) != sizeof(bits)) bits = 0;
  ::close(fd);
  return bits;
}

// Whether this process has `address`'s page in its page table (pagemap bit 63).
bool Present(const void* address) { return PagemapBits(address) >> 63 & 1; }

// Whether this process maps `address`'s page exclusively (pagemap bit 56).
bool Exclusive(const void* address) {
  std::uint64_t bits = PagemapBits(address);
  return (bits >> 63 & 1) && (bits >> 56 & 1);
}

// Runs `body` in a forked child; returns its exit status (0 = all held).
template <typename Body>
int InChild(Body body) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

TEST(HotPages, FindsTheWrittenPagesOnly) {
  Region region;
  ASSERT_TRUE(region.ok());
  region.Write(0, 10);
  HotPages hot;
  ASSERT_TRUE(hot.Observe());
  for (std::size_t i = 0; i < 10; ++i) EXPECT_TRUE(hot.Contains(region.page(i))) << i;
  for (std::size_t i = 10; i < kPages; ++i) EXPECT_FALSE(hot.Contains(region.page(i))) << i;
  EXPECT_FALSE(hot.over_cap());
}

TEST(HotPages, AfterAForkOnlyThePagesWrittenSinceAreFound) {
  Region region;
  ASSERT_TRUE(region.ok());
  region.Write(0, kPages);  // all present, shared with the child after the fork
  int status = InChild([&] {
    HotPages hot;
    region.Write(5, 3);  // copy-on-write: now this child's own
    if (!hot.Observe()) return 1;
    for (std::size_t i = 5; i < 8; ++i) {
      if (!hot.Contains(region.page(i))) return 2;
    }
    if (hot.Contains(region.page(0)) || hot.Contains(region.page(20))) return 3;
    return 0;
  });
  EXPECT_EQ(status, 0);
}

TEST(HotPages, PopulateInAForkedChildTakesTheCopiesBeforeAnyWrite) {
  Region region;
  ASSERT_TRUE(region.ok());
  region.Write(0, kPages);
  HotPages hot(HotPages::Options{});
  // The "standby" (this process, forked below) must not own the pages alone:
  // record in a child that shares them with us, then fork its own child.
  int status = InChild([&] {
    region.Write(10, 4);
    if (!hot.Observe()) return 1;
    return InChild([&] {
      // The "runner": shares everything with its parent until it populates.
      if (Exclusive(region.page(10))) return 2;
      std::size_t populated = hot.Populate();
      if (!hot.supported()) return 0;  // an old kernel: the documented no-op
      if (populated < 4) return 3;
      for (std::size_t i = 10; i < 14; ++i) {
        if (!Exclusive(region.page(i))) return 4;
        if (region.page(i)[0] != 1) return 5;  // contents kept
      }
      if (Exclusive(region.page(30))) return 6;  // not hot: still shared
      return 0;
    });
  });
  EXPECT_EQ(status, 0);
}

TEST(HotPages, OverTheCapTheSetIsDropped) {
  Region region;
  ASSERT_TRUE(region.ok());
  region.Write(0, kPages);
  HotPages::Options options;
  options.max_bytes = 4 * HotPages::PageSize();
  options.max_file_bytes = 0;  // and no code pages either, so nothing to populate
  HotPages hot(options);
  ASSERT_TRUE(hot.Observe());
  EXPECT_TRUE(hot.over_cap());
  EXPECT_EQ(hot.file_pages(), 0u);
  EXPECT_EQ(hot.pages(), 0u);
  EXPECT_EQ(hot.Populate(), 0u);
}

TEST(HotPages, AnObservationWithTooManyNewPagesAddsNone) {
  Region region;
  ASSERT_TRUE(region.ok());
  region.Write(0, kPages);
  HotPages::Options options;
  options.max_new_bytes = 4 * HotPages::PageSize();
  HotPages hot(options);
  ASSERT_TRUE(hot.Observe());
  EXPECT_FALSE(hot.over_cap());
  EXPECT_FALSE(hot.Contains(region.page(0)));
  EXPECT_EQ(hot.pages(), 0u);
}

TEST(HotPages, OverTheScanLimitNothingIsScanned) {
  Region region;
  ASSERT_TRUE(region.ok());
  region.Write(0, 8);
  HotPages::Options options;
  options.max_scan_bytes = 4 * HotPages::PageSize();  // less than any process maps
  HotPages hot(options);
  ASSERT_TRUE(hot.Observe());
  EXPECT_TRUE(hot.over_cap());
  EXPECT_FALSE(hot.Contains(region.page(0)));
}

TEST(HotPages, PagesItPopulatedItselfAgeOut) {
  Region region;
  ASSERT_TRUE(region.ok());
  region.Write(0, 8);
  HotPages::Options options;
  options.max_age = 3;
  HotPages hot(options);
  ASSERT_TRUE(hot.Observe());
  ASSERT_TRUE(hot.Contains(region.page(0)));
  hot.Populate();  // marks them: being exclusive no longer renews them
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(hot.Observe());
    EXPECT_TRUE(hot.Contains(region.page(0))) << i;
  }
  ASSERT_TRUE(hot.Observe());
  EXPECT_FALSE(hot.Contains(region.page(0)));
  // Found again on the next observation (this process still writes them).
  ASSERT_TRUE(hot.Observe());
  EXPECT_TRUE(hot.Contains(region.page(0)));
}

TEST(HotPages, UnmappedPagesAreSkipped) {
  Region region;
  ASSERT_TRUE(region.ok());
  region.Write(0, 8);
  HotPages hot;
  ASSERT_TRUE(hot.Observe());
  ASSERT_TRUE(hot.Contains(region.page(0)));
  region.Unmap();
  char* probe = static_cast<char*>(::mmap(nullptr, HotPages::PageSize(), PROT_READ,
                                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  (void)hot.Populate();  // must neither crash nor map the old range back
  if (probe != MAP_FAILED) ::munmap(probe, HotPages::PageSize());
  SUCCEED();
}

// One step of a runner lineage: observe here, then in a forked child (the
// next runner; this process stays alive as its standby) populate, let "the
// cell" write pages 0-3 with new contents, and go on. Pages 4-7 were written
// only before the first step. Returns 0 when 0-3 stayed hot at every step
// and 4-7 aged out.
int LineageStep(HotPages& hot, const Region& region, int steps_left) {
  if (!hot.Observe()) return 10;
  // Never dropped, not even for one observation (a runner would then not
  // populate them, and the cell would take their faults).
  if (!hot.Contains(region.page(0)) || !hot.Contains(region.page(3))) return 11;
  if (steps_left == 0) {
    if (hot.Contains(region.page(4)) || hot.Contains(region.page(7))) return 12;
    return 0;
  }
  return InChild([&] {
    hot.Populate();
    for (std::size_t i = 0; i < 4; ++i) region.page(i)[1] = static_cast<char>(steps_left);
    return LineageStep(hot, region, steps_left - 1);
  });
}

TEST(HotPages, PopulatedPagesTheCellsKeepWritingStayHot) {
  Region region;
  ASSERT_TRUE(region.ok());
  region.Write(0, 8);
  HotPages::Options options;
  options.max_age = 3;
  HotPages hot(options);
  EXPECT_EQ(LineageStep(hot, region, 8), 0);
}

TEST(HotPages, CodePagesRunBeforeTheForkAreMappedInTheChild) {
  // A private read-only file mapping stands for libpython's text.
  char path[] = "/tmp/dolsot-hot-pages-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::unlink(path);
  const std::size_t size = 8 * HotPages::PageSize();
  std::string bytes(size, 'c');
  ASSERT_EQ(::write(fd, bytes.data(), size), static_cast<ssize_t>(size));
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ASSERT_NE(mapped, MAP_FAILED);
  // No fault-around past what we read: advise random access.
  ::madvise(mapped, size, MADV_RANDOM);
  const char* file = static_cast<const char*>(mapped);
  const std::size_t page = HotPages::PageSize();
  volatile char sink = file[0] + file[5 * page];
  (void)sink;
  HotPages hot;
  ASSERT_TRUE(hot.Observe());
  EXPECT_TRUE(hot.ContainsFilePage(file));
  EXPECT_TRUE(hot.ContainsFilePage(file + 5 * page));
  int status = InChild([&] {
    // fork copied no page table entries for this mapping.
    if (Present(file) || Present(file + 5 * page)) return 1;
    if (hot.Populate() == 0) return 2;
    if (!Present(file) || !Present(file + 5 * page)) return 3;
    return 0;
  });
  EXPECT_EQ(status, 0);
  ::munmap(mapped, size);
}

bool SameRanges(const std::vector<Range>& a, const std::vector<Range>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].start != b[i].start || a[i].end != b[i].end) return false;
  }
  return true;
}

bool Covers(const std::vector<Range>& ranges, const void* address) {
  auto p = reinterpret_cast<std::uintptr_t>(address);
  for (const Range& r : ranges) {
    if (r.start <= p && p < r.end) return true;
  }
  return false;
}

// The kernel's query (where it has PROCMAP_QUERY) and the text of
// /proc/self/maps list the same mappings of each kind; a private writable
// region and this code are where they belong, a shared mapping nowhere.
TEST(HotPages, QueriedMappingsAreTheTextsOwn) {
  Region region;
  ASSERT_TRUE(region.ok());
  void* shared = ::mmap(nullptr, HotPages::PageSize(), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  // A mapping may come or go between two readings (another thread's
  // allocation): take the first pair of readings that agree.
  bool same = false;
  Mappings queried;
  for (int attempt = 0; attempt < 5 && !same; ++attempt) {
    queried = ReadMappings();
    Mappings text = ReadMappingsFromText();
    same = SameRanges(queried.writable, text.writable) && SameRanges(queried.file, text.file);
  }
  EXPECT_TRUE(same);
  EXPECT_TRUE(Covers(queried.writable, region.page(0)));
  EXPECT_TRUE(Covers(queried.file, reinterpret_cast<const void*>(&SameRanges)));
  EXPECT_FALSE(Covers(queried.writable, shared));
  EXPECT_FALSE(Covers(queried.file, shared));
  ::munmap(shared, HotPages::PageSize());
}

}  // namespace
}  // namespace dolsot
