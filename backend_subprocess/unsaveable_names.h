// UnsaveableNames: which names of a session a checkpoint cannot save, known
// cheaply enough to say so in every cell's Result.
#pragma once

#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dolsot {

// Which names of a session a checkpoint cannot save, known cheaply enough for
// every cell (so an async checkpoint's Result can say what its cell could not
// persist before the checkpoint is written): after a cell, only the names
// bound to another object than before are probed, and a probe runs no Python
// code. It finds pickle's "cannot pickle 'X' object" (a lock, a generator, a
// file, a frame) at the top level of a value and inside plain lists, tuples
// and dicts (a few levels, a few hundred items); a value whose pickling would
// run Python code (a class with its own __reduce__ or __getstate__, such as
// socket.socket), or one put into an object in place, shows when the
// checkpoint lands, in a later Result. Needs the GIL; leaves the error
// indicator clear.
class UnsaveableNames {
 public:
  // After a cell: the names of `globals` (except dunders and `skip`) found
  // unsaveable, sorted. `rebound` (may be null) gets the names probed now.
  std::vector<std::string> Update(PyObject* globals, const std::vector<std::string>& skip,
                                  std::vector<std::string>* rebound);
  // Records `names` (restored from a checkpoint, or replayed plain values:
  // saveable) as they are bound now, without probing them.
  void Trust(PyObject* globals, const std::vector<std::string>& names);
  // What the last Update returned (after Trust: the names known
  // unsaveable): Update's answer after a cell proven to bind nothing.
  const std::vector<std::string>& last() const { return last_; }

 private:
  static constexpr std::size_t kMaxVisits = 256;  // values looked at per name
  struct Seen {
    std::uintptr_t id = 0;    // the object bound (never dereferenced)
    std::uintptr_t type = 0;  // and its type: an address reused by another type is new
    bool saveable = true;
  };
  static bool Probe(PyObject* value, int depth, std::size_t* visits);
  std::map<std::string, Seen, std::less<>> seen_;
  std::vector<std::string> last_;
};

}  // namespace dolsot
