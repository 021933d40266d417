// HugePageArenas: obmalloc's arena allocator over MADV_HUGEPAGE chunks.
#include "embedded/huge_page_arenas.h"

#include <Python.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace dolsot {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
// CPython frees an arena as soon as it empties and takes a new one moments
// later (a cell's temporaries): the last few freed keep their memory, so
// that churn costs no zeroing of fresh (huge) pages. Beyond them, a freed
// arena's memory goes back to the kernel.
constexpr std::size_t kWarmArenas = 16;

struct Chunk {
  char* base;
  std::size_t size;
};

// One per process (a forked child has its own copy of it and of the chunks).
// Its vectors are reserved up front: the allocator must not allocate through
// CPython, and rarely through malloc.
struct State {
  PyObjectArenaAllocator previous{};
  std::size_t chunk_bytes = 0;
  std::vector<Chunk> chunks;
  char* next = nullptr;       // bump pointer in chunks.back()
  char* committed = nullptr;  // [chunk, committed) is read-write, the rest PROT_NONE
  char* end = nullptr;
  std::vector<void*> warm;   // freed arenas of arena_size, memory kept (at most kWarmArenas)
  std::vector<void*> freed;  // freed arenas of arena_size, memory returned
  std::size_t arena_size = 0;
  std::size_t in_use = 0;
  std::size_t fallbacks = 0;
  bool installed = false;
};

State& Arenas() {
  static State* state = new State();  // never destroyed: CPython may free arenas at exit
  return *state;
}

// A chunk_bytes chunk aligned to a huge page, advised for THP, reserved
// PROT_NONE (made read-write 2 MiB at a time as arenas are handed out, so
// what scans a process's writable mappings, such as HotPages, never walks
// the unused rest); nullptr on failure.
char* MapChunk(std::size_t bytes) {
  const std::size_t span = bytes + kHugePage;
  void* raw = ::mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto start = reinterpret_cast<std::uintptr_t>(raw);
  std::uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  std::uintptr_t tail = aligned + bytes;
  if (start + span > tail) ::munmap(reinterpret_cast<void*>(tail), start + span - tail);
  ::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<char*>(aligned);
}

// Makes [s.next, s.next + size) read-write; false when it cannot.
bool Commit(State& s, std::size_t size) {
  if (s.next + size <= s.committed) return true;
  std::size_t grow = static_cast<std::size_t>(s.next + size - s.committed);
  grow = std::min<std::size_t>((grow + kHugePage - 1) & ~(kHugePage - 1),
                               static_cast<std::size_t>(s.end - s.committed));
  if (::mprotect(s.committed, grow, PROT_READ | PROT_WRITE) != 0) return false;
  s.committed += grow;
  return true;
}

bool InChunks(const State& s, const void* p) {
  const char* c = static_cast<const char*>(p);
  for (const Chunk& chunk : s.chunks) {
    if (c >= chunk.base && c < chunk.base + chunk.size) return true;
  }
  return false;
}

void* Allocate(void* /*ctx*/, std::size_t size) {
  State& s = Arenas();
  if (size == s.arena_size) {
    for (std::vector<void*>* list : {&s.warm, &s.freed}) {
      if (list->empty()) continue;
      void* p = list->back();
      list->pop_back();
      ++s.in_use;
      return p;
    }
  }
  if (size <= s.chunk_bytes && (s.next == nullptr || static_cast<std::size_t>(s.end - s.next) < size)) {
    if (s.chunks.size() < s.chunks.capacity()) {
      if (char* base = MapChunk(s.chunk_bytes)) {
        s.chunks.push_back({base, s.chunk_bytes});
        s.next = base;
        s.committed = base;
        s.end = base + s.chunk_bytes;
      }
    }
  }
  if (s.next != nullptr && static_cast<std::size_t>(s.end - s.next) >= size && Commit(s, size)) {
    void* p = s.next;
    s.next += size;
    if (s.arena_size == 0) s.arena_size = size;
    ++s.in_use;
    return p;
  }
  ++s.fallbacks;
  return s.previous.alloc(s.previous.ctx, size);
}

void Free(void* /*ctx*/, void* p, std::size_t size) {
  State& s = Arenas();
  if (p == nullptr) return;
  if (!InChunks(s, p)) {
    s.previous.free(s.previous.ctx, p, size);
    return;
  }
  --s.in_use;
  if (size == s.arena_size && s.warm.size() < kWarmArenas) {
    s.warm.push_back(p);
    return;
  }
  ::madvise(p, size, MADV_DONTNEED);  // the memory goes back; the address is kept
  if (size == s.arena_size && s.freed.size() < s.freed.capacity()) s.freed.push_back(p);
}

}  // namespace

bool TransparentHugePagesAvailable() {
  std::ifstream file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text;
  std::getline(file, text);
  return text.find("[always]") != std::string::npos || text.find("[madvise]") != std::string::npos;
}

bool InstallHugePageArenas(std::size_t chunk_bytes) {
  State& s = Arenas();
  if (s.installed) return true;
  if (!TransparentHugePagesAvailable()) return false;
  chunk_bytes = (chunk_bytes + kHugePage - 1) & ~(kHugePage - 1);
  if (chunk_bytes == 0) return false;
  s.chunk_bytes = chunk_bytes;
  // Up to 1 TiB in chunks and 64 Ki freed arenas listed (beyond that a freed
  // arena's memory still goes back, its address is not reused): the vectors
  // never grow once installed.
  s.chunks.reserve((std::size_t{1} << 40) / chunk_bytes);
  s.warm.reserve(kWarmArenas);
  s.freed.reserve(std::size_t{1} << 16);
  PyObject_GetArenaAllocator(&s.previous);
  PyObjectArenaAllocator mine{nullptr, Allocate, Free};
  PyObject_SetArenaAllocator(&mine);
  s.installed = true;
  return true;
}

bool InHugePageArenas(const void* address) { return InChunks(Arenas(), address); }

HugePageArenaStats GetHugePageArenaStats() {
  const State& s = Arenas();
  return {s.installed, s.chunks.size(), s.in_use, s.warm.size() + s.freed.size(), s.fallbacks};
}

}  // namespace dolsot
