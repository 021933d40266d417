// ReleaseOnWorker: drops what forgotten sessions held (namespace, builtins,
// context) on a pool worker, not on the thread that called Reset or Close.
// Dropping a namespace runs the finalizers of the objects only it held (a
// generator's `finally:`, `__del__`): that is the session's code, and it now
// runs on a cell thread, in the session's context, under the session's
// timeout, as a cell does, instead of on the host's thread without a bound.
// A dict among them (the namespace, its builtins) is emptied before it is
// dropped: a namespace is in a reference cycle with the functions defined in
// it, so dropping it alone would leave its objects to a later gc.collect(),
// on whichever thread runs that (a dict the host kept from Namespace() is
// emptied too: the session is forgotten).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

class CellWorkerPool;
class InterpreterLease;

// What one session held: every reference is owned (nullptr entries are
// skipped); its objects are dropped inside `context` (entered when not null).
struct HeldByForgottenSession {
  PyObject* context = nullptr;
  std::vector<PyObject*> objects;
};

// Hands the references to a worker of `pool` and waits (without the GIL)
// until they are dropped or `deadline` passes. Past the deadline a stopper
// thread raises KeyboardInterrupt in the worker every 50 ms for 2 s (each
// interrupts one finalizer, which Python reports as unraisable), and
// `count_late(+1)` is called, then `count_late(-1)` once the release ends;
// the release keeps its worker until then (a finalizer stuck in C code
// keeps it for good). True when the release ended by the deadline. When the
// pool is shut down, the references are dropped on the calling thread
// (taking the GIL). Call without holding the GIL.
bool ReleaseOnWorker(CellWorkerPool& pool, std::weak_ptr<InterpreterLease> interpreter,
                     std::vector<HeldByForgottenSession> held,
                     std::chrono::steady_clock::time_point deadline,
                     std::function<void(int)> count_late);

}  // namespace dolsot
