// A name from a C literal as an interned str, made once per interpreter, for
// the code on every cell's path that looks a name up (a dict key, an
// attribute, a module in sys.modules).
//
// Why: the C-string calls (PyDict_GetItemString, PyObject_GetAttrString,
// PyImport_AddModule) make a str from the literal on every call, and a str
// that is not the interned one never hits CPython's type attribute cache
// (which matches names by identity), so an attribute lookup walks the whole
// MRO. Warm, each costs well under a microsecond; with the caches cold, as
// they are when the agent thinks between cells, one such call measured
// 11-18 µs, and a paced cell made several on each side.
//
// The str lives as long as its interpreter: a table in the interpreter's
// state dict owns it, and the interpreter's finalization makes every cached
// pointer stale (a restarted interpreter, often at the same address, interns
// its own). Needs the GIL; the cache is shared by the threads of
// interpreters that share one GIL (never for interpreters with a GIL each).
#pragma once

#include <cstdint>

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling
struct _is;
typedef struct _is PyInterpreterState;  // NOLINT: CPython's own spelling

namespace dolsot {

class InternedName {
 public:
  constexpr explicit InternedName(const char* text) : text_(text) {}
  InternedName(const InternedName&) = delete;
  InternedName& operator=(const InternedName&) = delete;

  // The interned str (borrowed, valid while the current interpreter runs),
  // or nullptr with a Python error set (no memory).
  PyObject* get() const;
  const char* text() const { return text_; }

 private:
  const char* text_;
  mutable PyObject* str_ = nullptr;
  mutable PyInterpreterState* interpreter_ = nullptr;
  mutable std::uint64_t generation_ = 0;
};

}  // namespace dolsot
