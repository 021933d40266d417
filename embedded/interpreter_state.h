// InterpreterStateGuard: puts back, after a cell, what the cell could leave
// on the interpreter that outlives it and reaches the host and other
// sessions:
//   - sys.stdout, stderr, stdin and their __x__ originals, sys.displayhook,
//     excepthook, unraisablehook, breakpointhook (and their __x__ originals):
//     the very objects, compared by identity;
//   - sys.setrecursionlimit and sys.setswitchinterval;
//   - the trace and profile functions of the cell's thread (sys.settrace,
//     sys.setprofile) and threading's global hooks (threading.settrace,
//     setprofile, excepthook), when threading is imported;
//   - decimal's template contexts (DefaultContext, BasicContext,
//     ExtendedContext: the module's attributes, and every field, trap and
//     flag of each), when decimal is imported.
//
// What "before" means: the state when no cell of any session was running
// (taken when the first of the cells running at once starts). A state taken
// per cell would let a cell of session a change a hook, wait until a cell
// of session b starts, and have b's cell put the changed hook back "as it
// was" when b ends. The cost: while cells run (a late cell stuck in C code
// included), a change the host itself makes to these is put back at the end
// of the next cell.
//
// Cost: each part (sys's dict, threading's, decimal's, sys.modules for
// finding the two) is looked at entry by entry only when its dict's version
// tag (PEP 509, kept through 3.13) changed since it last held the baseline;
// otherwise one compare. decimal's templates change in place, so they are
// compared every cell, as _decimal's context bytes (layout checked once
// against the attributes; __reduce__, ~0.5 µs each, otherwise), and only
// once decimal is imported. Measured with callgrind on 3.11: ~1,070
// instructions a trivial cell, down from ~8,300 with a lookup per entry.
#pragma once

#include <atomic>

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

// Notes the state in the constructor and puts back what changed in the
// destructor. Needs the GIL in both, on the thread that runs the cell (the
// trace and profile functions are that thread's).
// Whether a guard counts in the cells running (see "What before means"):
// shared with whoever may declare its cell late. Touched under the GIL.
struct CellRunningCount {
  int state = 0;  // 0: not counted yet, 1: counted, 2: no longer counted
  // Set without the GIL when the cell is declared late (its deadline
  // passed): the next guard to start takes it out of the count.
  std::atomic<bool> late{false};
};

class InterpreterStateGuard {
 public:
  // `count` (optional) outlives the guard: through it, Detach can stop a
  // late cell's guard from counting.
  explicit InterpreterStateGuard(CellRunningCount* count = nullptr);
  ~InterpreterStateGuard();
  // A cell past its deadline that did not stop (a leaked thread) no longer
  // counts as running: the next cell takes the baseline afresh, so a host's
  // own change after it (a redirected sys.stdout) is kept, not put back
  // forever. Its guard still puts the baseline back if the cell ever ends.
  // Needs the GIL; a no-op unless the guard counted and has not ended.
  static void Detach(CellRunningCount& count);
  InterpreterStateGuard(const InterpreterStateGuard&) = delete;
  InterpreterStateGuard& operator=(const InterpreterStateGuard&) = delete;

 private:
  // The cell's thread's trace and profile functions (Py_tracefunc) and
  // their objects (owned): per thread, so noted per cell.
  void* trace_function_ = nullptr;
  void* profile_function_ = nullptr;
  PyObject* trace_object_ = nullptr;
  PyObject* profile_object_ = nullptr;
  CellRunningCount own_count_;    // when the constructor was given none
  CellRunningCount* count_;       // own_count_ or the caller's
};

}  // namespace dolsot
