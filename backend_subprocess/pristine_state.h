// PristineState: what a new session's runner held when its first snapshot
// forked, so that while every cell since was proven read-only or binding
// (embedded/read_only_cell.h) the runner can be made a new session again in
// place (session_process.cc's RenewInPlace, issue #39): no fork, no process
// made, as a pooled interpreter is handed back.
//
// Such cells change only the names they bind (and the plain values those
// hold, which the namespace holds alone), so the runner then differs from
// its snapshot, which holds exactly a new session, only in its namespace;
// and in what the cell machinery keeps across cells: the cell sources
// (cell_sources.h), which Restore puts back with the namespace (the very
// objects they held, in their order), and what the runner forgets itself
// (proven functions, host variables). Restore refuses when the interpreter
// shows more than that changed (a module imported since, the builtins
// changed): then the snapshot is renewed instead.
//
// Not under a Sandbox (the host never asks there): each session's keeper
// holds walls of its own, and a process one session's cells ran in never
// serves another.
//
// Everything here needs the GIL.
#pragma once

#include <Python.h>  // first, as CPython asks

#include <cstdint>
#include <vector>

#include "embedded/py_ref.h"

namespace dolsot {

class PristineState {
 public:
  PristineState() = default;
  PristineState(const PristineState&) = delete;
  PristineState& operator=(const PristineState&) = delete;

  // Notes `globals` (a dict) as it is now, with the cell sources registered
  // (cell_sources.h), `cells_run`, and which objects `builtins` (a dict)
  // binds (a fingerprint: no reference taken, no page of theirs written):
  // the state of the snapshot just forked, which holds a new session.
  // Holds nothing (no renewal in place) without memory to copy them, or
  // when one of those dicts holds a mutable container that is not empty
  // (`__annotations__` is one, empty: Restore checks it still is, where a
  // copy of a fuller one would not show what changed inside its items).
  void Note(PyObject* globals, PyObject* builtins, std::uint64_t cells_run);
  // The snapshot no longer holds a new session, or a cell took the general
  // path: nothing is held.
  void Forget();
  bool held() const { return !dicts_.empty(); }
  std::uint64_t cells_run() const { return cells_run_; }

  // Puts the namespace and the cell sources' dicts back as Note saw them:
  // the same objects under the same names in the same order, every other
  // name gone. False when nothing is held, or when the interpreter changed
  // past them (sys.modules holds another count of modules, the builtins
  // bind other objects, a container Note saw empty is not): nothing is
  // changed then; or when putting back fails (no memory: they may be half
  // put back, and the caller serves nothing more from them). Never raises.
  bool Restore();

 private:
  struct Noted {
    Ref dict;  // the dict itself (held: linecache.cache may be replaced)
    Ref copy;  // and a copy as Note saw it (its values, not copies of them)
  };
  std::vector<Noted> dicts_;  // the namespace, the cell sources'
  std::vector<Ref> empty_;    // the mutable containers they held, empty then
  Ref builtins_;              // the builtins' dict
  std::uint64_t builtins_fingerprint_ = 0;
  Py_ssize_t modules_ = -1;   // len(sys.modules)
  std::uint64_t cells_run_ = 0;
};

}  // namespace dolsot
