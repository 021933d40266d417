// HotPages: the pages a session's cells recently wrote or ran, so a runner
// that just forked its snapshot can take their faults before a cell arrives
// instead of during it.
//
// After a fork every private page is shared between the runner and its
// snapshot; the first write to one costs a copy-on-write fault (~17 µs here).
// The runner, just after a cell, finds the pages it wrote since it forked the
// last snapshot: those are the ones /proc/self/pagemap reports as
// "exclusively mapped" (bit 56; this kernel has no soft-dirty bits) while that
// snapshot still shares the rest. Once it has forked the next snapshot it
// pre-faults them with madvise(MADV_POPULATE_WRITE) while it is idle.
//
// A page stays hot for `max_age` observations after it was last found. The
// runner's own pre-faulting makes pages exclusive too, so being exclusive does
// not renew a page it populated: a page about to age out is fingerprinted when
// populated, and renewed only if its contents changed by the next observation
// (a cell wrote it). Over `max_bytes` the set is dropped, and an observation
// with more than `max_new_bytes` of new pages (a cell that built new data)
// adds none of them (populating them would cost more than the faults it
// saves).
// Over `max_scan_bytes` of private writable mappings it does not even scan
// (reading pagemap costs per mapped page). Where MADV_POPULATE_WRITE is missing
// (EINVAL) Populate is a no-op.
//
// Code and constants cost faults too: fork copies no page table entries for
// read-only file mappings (libpython's text, extension modules), so a fresh
// runner faults on every page of them it runs. Observe also records the pages
// of those mappings present in this process (the ones it ran since its own
// fork), up to `max_file_bytes`, and Populate maps them with
// MADV_POPULATE_READ (no copies: the page cache's pages are shared).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace dolsot {

// This process's private mappings, as HotPages reads them: `writable`
// (copy-on-write after a fork) and `file` (read-only with an inode: code,
// constants), each [start, end) in bytes, ascending.
struct Range {
  std::uintptr_t start;
  std::uintptr_t end;
};
struct Mappings {
  std::vector<Range> writable;
  std::vector<Range> file;
};
// By the PROCMAP_QUERY ioctl where the kernel has it (6.11), else from the
// text of /proc/self/maps.
Mappings ReadMappings();
// From the text only (any kernel; tests compare the two).
Mappings ReadMappingsFromText();

class HotPages {
 public:
  struct Options {
    std::size_t max_bytes = std::size_t{256} << 20;
    std::uint32_t max_age = 16;
    // An observation that finds more new pages than this adds none of them.
    std::size_t max_new_bytes = std::size_t{32} << 20;
    // Over this much private writable mapping, Observe does not scan at all.
    std::size_t max_scan_bytes = std::size_t{512} << 20;
    // Read-only file-backed pages: at most this many are recorded, and over
    // max_file_scan_bytes of such mappings none are.
    std::size_t max_file_bytes = std::size_t{64} << 20;
    std::size_t max_file_scan_bytes = std::size_t{1} << 30;
  };

  HotPages() = default;
  explicit HotPages(Options options) : options_(options) {}

  // Records the pages of this process's private writable mappings that are
  // exclusively mapped now. Call before forking (in the process that will be
  // the parent), while the process it last forked (or was forked from) still
  // shares the pages not written since.
  // Returns false when /proc/self/pagemap could not be read.
  bool Observe();

  // Pre-faults the recorded pages (in the runner, after the fork), in chunks; stops
  // early when `stop()` returns true between chunks. Returns the number of
  // pages populated. Pages no longer in a private writable mapping are
  // skipped.
  std::size_t Populate(const std::function<bool()>& stop = {});

  std::size_t pages() const { return entries_.size(); }
  // Recorded pages of read-only file mappings.
  std::size_t file_pages() const { return file_pages_.size(); }
  std::size_t bytes() const { return entries_.size() * PageSize(); }
  // True when the last Observe found more than max_bytes (the set is empty).
  bool over_cap() const { return over_cap_; }
  // False once MADV_POPULATE_WRITE turned out to be unsupported.
  bool supported() const { return supported_; }
  // Whether `address`'s page is in the set (for tests).
  bool Contains(const void* address) const;
  bool ContainsFilePage(const void* address) const;

  static std::size_t PageSize();

 private:
  struct Entry {
    std::uintptr_t page;   // address >> page shift
    std::uint32_t stamp;   // observation at which it was last found
    bool populated;        // pre-faulted by this process (exclusive: no proof of a write)
    std::uint64_t hash;    // when populated just before aging out: its fingerprint, else 0
  };

  std::vector<Entry> Merge(const std::vector<std::uintptr_t>& found, bool add_new) const;

  Options options_;
  std::vector<Entry> entries_;  // sorted by page
  std::vector<std::uintptr_t> file_pages_;  // sorted
  std::uint32_t clock_ = 0;
  bool over_cap_ = false;
  bool supported_ = true;
};

}  // namespace dolsot
