// HotPages: find recently written pages via /proc/self/pagemap and pre-fault
// them after a fork with MADV_POPULATE_WRITE.
#include "backend_subprocess/hot_pages.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "core/unique_fd.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older headers lack them
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace dolsot {
namespace {

constexpr std::uint64_t kPresent = std::uint64_t{1} << 63;
constexpr std::uint64_t kExclusive = std::uint64_t{1} << 56;
constexpr std::size_t kScanChunk = 4096;      // pagemap entries per read
// Pages per madvise: small, so a cell that arrives waits at most for one
// chunk (~32 copy-on-write copies) before the runner stops populating.
constexpr std::size_t kPopulateChunk = 32;
// Mapping page-cache pages read-only is cheaper (no copy): larger chunks.
constexpr std::size_t kPopulateReadChunk = 128;

}  // namespace

// This process's mappings of both kinds, ascending, from the text of
// /proc/self/maps (any kernel).
Mappings ReadMappingsFromText() {
  Mappings out;
  std::FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return out;
  char line[4096];
  while (std::fgets(line, sizeof(line), maps) != nullptr) {
    unsigned long start = 0, end = 0, offset = 0, inode = 0;
    unsigned major = 0, minor = 0;
    char perms[5] = {};
    int consumed = 0;
    if (std::sscanf(line, "%lx-%lx %4s %lx %x:%x %lu%n", &start, &end, perms, &offset, &major,
                    &minor, &inode, &consumed) != 7) {
      continue;
    }
    bool long_line = std::strchr(line, '\n') == nullptr;
    bool special = std::strstr(line + consumed, "[vsyscall]") != nullptr ||
                   std::strstr(line + consumed, "[vvar") != nullptr ||
                   std::strstr(line + consumed, "[vdso]") != nullptr;
    if (!special && end > start && perms[0] == 'r' && perms[3] == 'p') {
      if (perms[1] == 'w') {
        out.writable.push_back({start, end});
      } else if (inode != 0) {
        out.file.push_back({start, end});
      }
    }
    // Skip the rest of an over-long line (a very long path).
    while (long_line && std::fgets(line, sizeof(line), maps) != nullptr &&
           std::strchr(line, '\n') == nullptr) {
    }
  }
  std::fclose(maps);
  return out;
}

namespace {

// The PROCMAP_QUERY ioctl on /proc/self/maps (Linux 6.11; uapi linux/fs.h,
// spelled out here for older headers): one binary record a mapping, with no
// path formatted and no text parsed. Reading the text cost about a tenth of
// a paced cell's CPU here (d_path of every file mapping, then sscanf).
struct ProcmapQuery {
  std::uint64_t size;
  std::uint64_t query_flags;
  std::uint64_t query_addr;
  std::uint64_t vma_start;
  std::uint64_t vma_end;
  std::uint64_t vma_flags;
  std::uint64_t vma_page_size;
  std::uint64_t vma_offset;
  std::uint64_t inode;
  std::uint32_t dev_major;
  std::uint32_t dev_minor;
  std::uint32_t vma_name_size;
  std::uint32_t build_id_size;
  std::uint64_t vma_name_addr;
  std::uint64_t build_id_addr;
};
static_assert(sizeof(ProcmapQuery) == 104, "struct procmap_query");
constexpr unsigned long kProcmapQuery = 0xC0686611;  // _IOWR('f', 17, struct procmap_query)
constexpr std::uint64_t kVmaReadable = 0x01;
constexpr std::uint64_t kVmaWritable = 0x02;
constexpr std::uint64_t kVmaShared = 0x08;
constexpr std::uint64_t kCoveringOrNextVma = 0x10;

std::atomic<bool> g_no_procmap_query{false};  // the kernel said it has none

// The same as ReadMappingsFromText, by PROCMAP_QUERY; nullopt where the
// kernel lacks it (or it failed: the text then answers).
std::optional<Mappings> QueryMappings() {
  if (g_no_procmap_query.load(std::memory_order_relaxed)) return std::nullopt;
  UniqueFd maps(::open("/proc/self/maps", O_RDONLY | O_CLOEXEC));
  if (!maps) return std::nullopt;
  Mappings out;
  std::uint64_t next = 0;
  for (;;) {
    ProcmapQuery q{};
    q.size = sizeof q;
    q.query_flags = kCoveringOrNextVma;
    q.query_addr = next;
    if (::ioctl(maps.get(), kProcmapQuery, &q) != 0) {
      if (errno == ENOENT) return out;  // no mapping at or above `next`
      if (errno == ENOTTY || errno == EINVAL) g_no_procmap_query.store(true);
      return std::nullopt;
    }
    // Only the gate page ([vsyscall]) and the vDSO's are special, and the
    // query lists no gate page; the vDSO's and [vvar] are not writable and
    // have no inode, so the tests below leave them out as the text's do.
    if (q.vma_end > q.vma_start && (q.vma_flags & kVmaReadable) && !(q.vma_flags & kVmaShared)) {
      if (q.vma_flags & kVmaWritable) {
        out.writable.push_back({static_cast<std::uintptr_t>(q.vma_start),
                                static_cast<std::uintptr_t>(q.vma_end)});
      } else if (q.inode != 0) {
        out.file.push_back({static_cast<std::uintptr_t>(q.vma_start),
                            static_cast<std::uintptr_t>(q.vma_end)});
      }
    }
    if (q.vma_end <= next) return std::nullopt;  // no progress: never loop
    next = q.vma_end;
  }
}

}  // namespace

Mappings ReadMappings() {
  if (std::optional<Mappings> queried = QueryMappings()) return std::move(*queried);
  return ReadMappingsFromText();
}

namespace {

// A cheap fingerprint of one page (FNV-style over 64-bit words), to tell
// whether a page this process populated itself was written since; 0 when
// the page cannot be read. It reads through process_vm_readv, not a pointer:
// a thread the cell started may unmap or protect the page meanwhile, and
// that must be an error here, not a crash of the process holding the state.
std::uint64_t PageHash(std::uintptr_t page, std::size_t page_size) {
  std::vector<std::uint64_t> words(page_size / sizeof(std::uint64_t));
  iovec local{words.data(), page_size};
  iovec remote{reinterpret_cast<void*>(page * page_size), page_size};
  if (::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) !=
      static_cast<ssize_t>(page_size)) {
    return 0;
  }
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::uint64_t w : words) h = (h ^ w) * 0x100000001b3ull;
  return h | 1;  // never 0
}

// Appends to `found` the pages of `ranges` whose pagemap entry has all `bits`;
// false (and stops) once more than `cap` pages are found.
bool ScanPagemap(int pagemap, const std::vector<Range>& ranges, std::uint64_t bits,
                 std::size_t cap, std::vector<std::uintptr_t>& found) {
  const std::size_t page_size = HotPages::PageSize();
  std::vector<std::uint64_t> buffer(kScanChunk);
  for (const Range& range : ranges) {
    std::uintptr_t first = range.start / page_size;
    std::uintptr_t last = range.end / page_size;
    for (std::uintptr_t page = first; page < last;) {
      std::size_t count = std::min<std::uintptr_t>(kScanChunk, last - page);
      ssize_t got = ::pread(pagemap, buffer.data(), count * sizeof(std::uint64_t),
                            static_cast<off_t>(page * sizeof(std::uint64_t)));
      if (got <= 0) break;  // the mapping went away, or an unreadable range
      std::size_t entries = static_cast<std::size_t>(got) / sizeof(std::uint64_t);
      for (std::size_t i = 0; i < entries; ++i) {
        if ((buffer[i] & bits) == bits) found.push_back(page + i);
      }
      if (found.size() > cap) return false;
      page += entries;
    }
  }
  return true;
}

std::size_t Bytes(const std::vector<Range>& ranges) {
  std::size_t total = 0;
  for (const Range& range : ranges) total += range.end - range.start;
  return total;
}

// madvise(advice) over `pages` (sorted by page number, page_of gives it) in
// chunks of consecutive pages intersected with `mappings`; calls `after_run`
// after each chunk and stops when it returns true. Returns the pages
// populated, or nullopt at the first EINVAL when `einval_means_unsupported`
// (an old kernel). Otherwise EINVAL only skips its range: it also comes from
// a mapping that cannot be populated (a device's, say).
template <typename Page, typename PageOf, typename AfterRun>
std::optional<std::size_t> Advise(std::vector<Page>& pages, PageOf page_of,
                                  const std::vector<Range>& mappings, int advice,
                                  bool einval_means_unsupported, std::size_t chunk,
                                  AfterRun after_run) {
  const std::size_t page_size = HotPages::PageSize();
  std::size_t populated = 0;
  std::size_t m = 0;
  std::size_t i = 0;
  while (i < pages.size()) {
    // A run of consecutive pages, cut to `chunk`.
    std::size_t run_end = i + 1;
    while (run_end < pages.size() && run_end - i < chunk &&
           page_of(pages[run_end]) == page_of(pages[run_end - 1]) + 1) {
      ++run_end;
    }
    std::uintptr_t start = page_of(pages[i]) * page_size;
    std::uintptr_t end = page_of(pages[run_end - 1]) * page_size + page_size;
    // Intersect with the mappings (ascending, like the runs).
    while (m < mappings.size() && mappings[m].end <= start) ++m;
    for (std::size_t n = m; n < mappings.size() && mappings[n].start < end; ++n) {
      std::uintptr_t a = std::max(start, mappings[n].start);
      std::uintptr_t b = std::min(end, mappings[n].end);
      if (a >= b) continue;
      if (::madvise(reinterpret_cast<void*>(a), b - a, advice) == 0) {
        populated += (b - a) / page_size;
      } else if (errno == EINVAL && einval_means_unsupported) {
        return std::nullopt;  // an old kernel: nothing to gain, stop trying
      }
      // ENOMEM/EFAULT (unmapped or not of this kind now): skip the range.
    }
    if (after_run(i, run_end)) break;
    i = run_end;
  }
  return populated;
}

}  // namespace

std::size_t HotPages::PageSize() {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

bool HotPages::ContainsFilePage(const void* address) const {
  std::uintptr_t page = reinterpret_cast<std::uintptr_t>(address) / PageSize();
  return std::binary_search(file_pages_.begin(), file_pages_.end(), page);
}

bool HotPages::Contains(const void* address) const {
  std::uintptr_t page = reinterpret_cast<std::uintptr_t>(address) / PageSize();
  auto it = std::lower_bound(entries_.begin(), entries_.end(), page,
                             [](const Entry& e, std::uintptr_t p) { return e.page < p; });
  return it != entries_.end() && it->page == page;
}

bool HotPages::Observe() {
  ++clock_;
  UniqueFd pagemap(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  if (!pagemap) return false;
  const std::size_t page_size = PageSize();
  const std::size_t max_pages = options_.max_bytes / page_size;
  Mappings mappings = ReadMappings();
  // Code pages: every present page of a read-only file mapping. After a fork
  // the child maps none of them (the kernel does not copy page tables it can
  // fault back in), so these are exactly the pages this process ran or
  // populated.
  file_pages_.clear();
  if (Bytes(mappings.file) > options_.max_file_scan_bytes ||
      !ScanPagemap(pagemap.get(), mappings.file, kPresent, options_.max_file_bytes / page_size,
                   file_pages_)) {
    file_pages_.clear();
  }
  over_cap_ = false;
  std::vector<std::uintptr_t> found;
  if (Bytes(mappings.writable) > options_.max_scan_bytes ||
      !ScanPagemap(pagemap.get(), mappings.writable, kPresent | kExclusive, max_pages, found)) {
    // Too big to be worth it: reading pagemap costs per mapped page (~0.1 ms
    // per MB here), and populating that much would cost more than the faults
    // it saves.
    over_cap_ = true;
    entries_.clear();
    return true;
  }
  // Merge (both sorted): renew what was found, unless this process populated
  // it itself and did not write it since; add the new; age out the old. A
  // cell that wrote more than max_new_bytes of new pages (typically: it built
  // new data) adds none: the next cells rarely rewrite all of that, and
  // copying it ahead would cost more than the faults it saves.
  std::vector<Entry> merged = Merge(found, true);
  if (merged.size() - entries_.size() > options_.max_new_bytes / page_size) {
    merged = Merge(found, false);
  }
  merged.erase(std::remove_if(merged.begin(), merged.end(),
                              [&](const Entry& e) { return clock_ - e.stamp >= options_.max_age; }),
               merged.end());
  if (merged.size() > max_pages) {
    over_cap_ = true;
    merged.clear();
  }
  entries_ = std::move(merged);
  return true;
}

std::vector<HotPages::Entry> HotPages::Merge(const std::vector<std::uintptr_t>& found,
                                             bool add_new) const {
  const std::size_t page_size = PageSize();
  std::vector<Entry> merged;
  merged.reserve(entries_.size() + (add_new ? found.size() : 0));
  std::size_t i = 0, j = 0;
  while (i < entries_.size() || j < found.size()) {
    if (j == found.size() || (i < entries_.size() && entries_[i].page < found[j])) {
      merged.push_back(entries_[i++]);
    } else if (i == entries_.size() || found[j] < entries_[i].page) {
      if (add_new) merged.push_back({found[j], clock_, false, 0});
      ++j;
    } else {
      Entry e = entries_[i++];
      ++j;
      // A page this process populated is exclusive whether or not it was
      // written since; one about to age out was fingerprinted when populated,
      // so a change shows the cells still write it.
      bool written = !e.populated ||
                     (e.hash != 0 && PageHash(e.page, page_size) != e.hash);
      if (written) e.stamp = clock_;
      merged.push_back(e);
    }
  }
  return merged;
}

std::size_t HotPages::Populate(const std::function<bool()>& stop) {
  if (!supported_ || (entries_.empty() && file_pages_.empty()) || (stop && stop())) return 0;
  const std::size_t page_size = PageSize();
  Mappings mappings = ReadMappings();
  bool stopped = false;
  // The pages recent cells wrote: take their copy-on-write copies now.
  auto written = Advise(
      entries_, [](const Entry& e) { return e.page; }, mappings.writable, MADV_POPULATE_WRITE,
      /*einval_means_unsupported=*/true, kPopulateChunk, [&](std::size_t first, std::size_t end) {
        for (std::size_t k = first; k < end; ++k) {
          Entry& e = entries_[k];
          e.populated = true;
          // Fingerprint the pages that would age out at the next Observe,
          // so it can tell whether the cell wrote them.
          e.hash = clock_ - e.stamp + 1 >= options_.max_age ? PageHash(e.page, page_size) : 0;
        }
        stopped = stop && stop();
        return stopped;
      });
  if (!written) {
    supported_ = false;
    return 0;
  }
  if (stopped) return *written;
  // The code and constants recent cells ran: map them now.
  auto mapped = Advise(
      file_pages_, [](std::uintptr_t page) { return page; }, mappings.file, MADV_POPULATE_READ,
      /*einval_means_unsupported=*/false, kPopulateReadChunk,
      [&](std::size_t, std::size_t) { return stop && stop(); });
  return *written + mapped.value_or(0);
}

}  // namespace dolsot
