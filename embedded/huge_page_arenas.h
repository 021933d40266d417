// HugePageArenas: CPython's small-object arenas (obmalloc, 1 MiB each) carved
// out of 2 MiB-aligned chunks the kernel may back with transparent huge pages
// (madvise(MADV_HUGEPAGE)), for processes that fork a copy of themselves per
// cell (a Repl session's runner forks its rollback snapshot after every cell).
//
// Why: fork copies the page tables of every private page the process maps,
// so a snapshot of a session holding 100 MB of Python objects costs ~25,600
// page-table entries copied, then torn down when the snapshot is dropped:
// 10-17 ms of CPU per cell on this VM (docs/bench/cpu.md). Memory a huge
// page backs is copied as one PMD entry per 2 MiB (512 times fewer); since
// Linux 5.8 a write to a shared huge page splits it and copies only the 4 KiB
// page written, so copy-on-write stays as fine-grained as before, and only
// the pages a cell touches lose their huge mapping. Where THP is off
// (`never`) or a chunk cannot be mapped, arenas come from CPython's own
// allocator, as before.
//
// Chunks are reserved as arenas are needed (64 MiB of address space at a
// time, so an RLIMIT_AS cap is not spent on reservations). The last 16 freed
// arenas keep their memory (CPython frees and retakes arenas as a cell's
// temporaries come and go); beyond those a freed arena's memory goes back to
// the kernel (MADV_DONTNEED). Freed addresses are reused first. Arenas CPython allocated before Install() are freed by CPython's own
// allocator. Needs the GIL (CPython calls the allocator with it held).
#pragma once

#include <cstddef>

namespace dolsot {

struct HugePageArenaStats {
  bool installed = false;
  std::size_t chunks = 0;          // reserved chunks
  std::size_t arenas_in_use = 0;   // arenas handed out from chunks, not freed
  std::size_t arenas_freed = 0;    // freed, kept for reuse (the last 16 with their memory)
  std::size_t fallbacks = 0;       // arenas that came from CPython's allocator
};

// Installs the allocator once per process (later calls do nothing) unless
// transparent huge pages are off. Returns whether it is installed. The
// forked children of this process inherit it.
bool InstallHugePageArenas(std::size_t chunk_bytes = std::size_t{64} << 20);

// Whether `address` lies in one of the chunks (tests).
bool InHugePageArenas(const void* address);

HugePageArenaStats GetHugePageArenaStats();

// Whether the kernel may back madvise(MADV_HUGEPAGE) memory with huge pages
// (/sys/kernel/mm/transparent_hugepage/enabled is `always` or `madvise`).
bool TransparentHugePagesAvailable();

}  // namespace dolsot
