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

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

// Notes the state in the constructor and puts back what changed in the
// destructor. Needs the GIL in both, on the thread that runs the cell (the
// trace and profile functions are that thread's).
class InterpreterStateGuard {
 public:
  InterpreterStateGuard();
  ~InterpreterStateGuard();
  InterpreterStateGuard(const InterpreterStateGuard&) = delete;
  InterpreterStateGuard& operator=(const InterpreterStateGuard&) = delete;

 private:
  // The cell's thread's trace and profile functions (Py_tracefunc) and
  // their objects (owned): per thread, so noted per cell.
  void* trace_function_ = nullptr;
  void* profile_function_ = nullptr;
  PyObject* trace_object_ = nullptr;
  PyObject* profile_object_ = nullptr;
  bool counted_ = false;  // counted in the cells running (the baseline was found)
};

}  // namespace dolsot
