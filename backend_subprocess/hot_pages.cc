// HotPages: find recently written pages via /proc/self/pagemap and pre-fault
// them after a fork with MADV_POPULATE_WRITE.
#include "backend_subprocess/hot_pages.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "backend_subprocess/unique_fd.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older headers lack it
#endif

namespace dolsot {
namespace {

constexpr std::uint64_t kPresent = std::uint64_t{1} << 63;
constexpr std::uint64_t kExclusive = std::uint64_t{1} << 56;
constexpr std::size_t kScanChunk = 4096;      // pagemap entries per read
// Pages per madvise: small, so a cell that arrives waits at most for one
// chunk (~32 copy-on-write copies) before the runner stops populating.
constexpr std::size_t kPopulateChunk = 32;

struct Range {
  std::uintptr_t start;  // bytes
  std::uintptr_t end;
};

// The private writable mappings of this process, ascending.
std::vector<Range> PrivateWritableMappings() {
  std::vector<Range> out;
  std::FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return out;
  char line[4096];
  while (std::fgets(line, sizeof(line), maps) != nullptr) {
    unsigned long start = 0, end = 0;
    char perms[5] = {};
    int consumed = 0;
    if (std::sscanf(line, "%lx-%lx %4s%n", &start, &end, perms, &consumed) != 3) continue;
    bool long_line = std::strchr(line, '\n') == nullptr;
    if (perms[0] == 'r' && perms[1] == 'w' && perms[3] == 'p' &&
        std::strstr(line + consumed, "[vsyscall]") == nullptr &&
        std::strstr(line + consumed, "[vvar") == nullptr &&
        std::strstr(line + consumed, "[vdso]") == nullptr && end > start) {
      out.push_back({start, end});
    }
    // Skip the rest of an over-long line (a very long path).
    while (long_line && std::fgets(line, sizeof(line), maps) != nullptr &&
           std::strchr(line, '\n') == nullptr) {
    }
  }
  std::fclose(maps);
  return out;
}

}  // namespace

std::size_t HotPages::PageSize() {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
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
  std::vector<std::uintptr_t> found;
  std::vector<std::uint64_t> buffer(kScanChunk);
  over_cap_ = false;
  std::vector<Range> mappings = PrivateWritableMappings();
  std::size_t mapped = 0;
  for (const Range& range : mappings) mapped += range.end - range.start;
  if (mapped > options_.max_scan_bytes) {
    // Reading pagemap costs per mapped page (~0.1 ms per MB here): for a
    // big session it would cost more than the faults it could save.
    over_cap_ = true;
    entries_.clear();
    return true;
  }
  for (const Range& range : mappings) {
    std::uintptr_t first = range.start / page_size;
    std::uintptr_t last = range.end / page_size;
    for (std::uintptr_t page = first; page < last;) {
      std::size_t count = std::min<std::uintptr_t>(kScanChunk, last - page);
      ssize_t got = ::pread(pagemap.get(), buffer.data(), count * sizeof(std::uint64_t),
                            static_cast<off_t>(page * sizeof(std::uint64_t)));
      if (got <= 0) break;  // the mapping went away, or an unreadable range
      std::size_t entries = static_cast<std::size_t>(got) / sizeof(std::uint64_t);
      for (std::size_t i = 0; i < entries; ++i) {
        std::uint64_t bits = buffer[i];
        if ((bits & kPresent) && (bits & kExclusive)) found.push_back(page + i);
      }
      if (found.size() > max_pages) {
        over_cap_ = true;
        entries_.clear();
        return true;
      }
      page += entries;
    }
  }
  // Merge (both sorted): renew what was found, unless this process populated
  // it itself; add the new; age out the old. A cell that wrote more than
  // max_new_bytes of new pages (typically: it built new data) adds none: the
  // next cells rarely rewrite all of that, and copying it ahead would cost
  // more than the faults it saves.
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
  std::vector<Entry> merged;
  merged.reserve(entries_.size() + (add_new ? found.size() : 0));
  std::size_t i = 0, j = 0;
  while (i < entries_.size() || j < found.size()) {
    if (j == found.size() || (i < entries_.size() && entries_[i].page < found[j])) {
      merged.push_back(entries_[i++]);
    } else if (i == entries_.size() || found[j] < entries_[i].page) {
      if (add_new) merged.push_back({found[j], clock_, false});
      ++j;
    } else {
      Entry e = entries_[i++];
      ++j;
      if (!e.populated) e.stamp = clock_;
      merged.push_back(e);
    }
  }
  return merged;
}

std::size_t HotPages::Populate(const std::function<bool()>& stop) {
  if (!supported_ || entries_.empty() || (stop && stop())) return 0;
  const std::size_t page_size = PageSize();
  std::vector<Range> mappings = PrivateWritableMappings();
  std::size_t populated = 0;
  std::size_t m = 0;
  std::size_t i = 0;
  while (i < entries_.size()) {
    // A run of consecutive pages, cut to kPopulateChunk.
    std::size_t run_end = i + 1;
    while (run_end < entries_.size() && run_end - i < kPopulateChunk &&
           entries_[run_end].page == entries_[run_end - 1].page + 1) {
      ++run_end;
    }
    std::uintptr_t start = entries_[i].page * page_size;
    std::uintptr_t end = entries_[run_end - 1].page * page_size + page_size;
    for (std::size_t k = i; k < run_end; ++k) entries_[k].populated = true;
    i = run_end;
    // Intersect with the private writable mappings (ascending, like the runs).
    while (m < mappings.size() && mappings[m].end <= start) ++m;
    for (std::size_t n = m; n < mappings.size() && mappings[n].start < end; ++n) {
      std::uintptr_t a = std::max(start, mappings[n].start);
      std::uintptr_t b = std::min(end, mappings[n].end);
      if (a >= b) continue;
      if (::madvise(reinterpret_cast<void*>(a), b - a, MADV_POPULATE_WRITE) == 0) {
        populated += (b - a) / page_size;
      } else if (errno == EINVAL) {
        supported_ = false;  // an old kernel: nothing to gain, stop trying
        return populated;
      }
      // ENOMEM/EFAULT (unmapped or not writable now): skip the range.
    }
    if (stop && stop()) break;
  }
  return populated;
}

}  // namespace dolsot
