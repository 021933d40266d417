// The one owner of the embedded CPython interpreter (after pybind11's
// scoped_interpreter): a lease keeps the interpreter up; dolsot starts CPython
// when nobody has and finalizes it when the last lease is released.
//
// Who starts and who finalizes
//   AcquireInterpreter() starts CPython when no interpreter runs, and the
//   interpreter is then dolsot's: the last lease on it released finalizes it.
//   When the host runs CPython already (a Python process importing dolsot, a
//   C++ host with pybind11's scoped_interpreter), the lease only borrows it:
//   releasing it never finalizes, and the host must keep its interpreter up
//   while any lease on it lives. After a finalization, the next
//   AcquireInterpreter() starts a fresh interpreter (new sys.modules, new
//   builtins). CPython cannot unload extension modules, and some (numpy among
//   them) fail to import a second time in one process: a host that needs
//   those and may drop to no lease can hold a lease of its own for the life
//   of the process.
//
// On which thread
//   CPython expects to be finalized on the thread that started it (its main
//   thread: threading joins every other thread there). By default a thread of
//   dolsot's own starts CPython, waits, and finalizes it when told, so any
//   thread may take and release leases; CPython does not install its signal
//   handlers at the start (its main thread runs no Python code to handle
//   them). The subprocess worker instead starts CPython on its own main
//   thread (kCallingThread).
//
// The GIL
//   - AcquireInterpreter may be called from any thread, with or without the
//     GIL. When it starts CPython, it returns with the GIL free: any thread,
//     the caller included, takes it with PyGILState_Ensure.
//   - Hold a lease while touching Python; then no finalization can start.
//     Threads a cell starts itself hold no lease: at a finalization non-daemon
//     ones are joined and daemon ones stop, as at the end of a python program.
//   - Releasing the last lease on dolsot's interpreter finalizes it before the
//     release returns (the releasing thread waits for dolsot's thread). The
//     releasing thread must not hold the GIL: if it does, the interpreter is
//     left running, and the next time the last lease is released without the
//     GIL finalizes it.
//   - A call made from Python code that runs while the interpreter starts or
//     is finalized (site, atexit, __del__) fails with kUnavailable; on every
//     other thread, AcquireInterpreter waits for the start or finalization.
//
// Process exit
//   An interpreter still leased when the process exits (a cell stuck in C
//   code holds one for its thread until it ends) is not finalized: the
//   process exits with it running, as it does with CPython's daemon threads.
//   A lease released after exit() began finalizes nothing.
//
// The subprocess worker (dolsot-worker) takes one lease in main() with
// kCallingThread (CPython's signal handlers, its main thread Python's main
// thread) and its venv's python as the program name, takes the GIL back with
// PyGILState_Ensure, and never releases that lease: it and every session
// process it forks end with _exit, never finalizing (it forks only while
// single-threaded, so no other thread holds this module's lock).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"

namespace dolsot {

// Where CPython's main thread is (see the file comment).
enum class PythonMainThread {
  kDolsotThread,   // a thread of dolsot's own; no signal handlers at the start
  kCallingThread,  // the caller's, with CPython's signal handlers; the interpreter
                   // is finalized only when its last lease is released there
};

// Used only by the call that starts CPython; ignored when it already runs.
struct InterpreterOptions {
  // The interpreter's program name ("" = CPython's default). sys.executable,
  // sys.prefix, and so a venv's site-packages, follow from it.
  std::string program_name;
  PythonMainThread main_thread = PythonMainThread::kDolsotThread;
};

// A share in the interpreter. Share it by copying the shared_ptr: the lease
// is released when the last copy is destroyed.
class InterpreterLease {
 public:
  ~InterpreterLease();  // releases (see the file comment for the GIL rule)
  InterpreterLease(const InterpreterLease&) = delete;
  InterpreterLease& operator=(const InterpreterLease&) = delete;

  // True when dolsot started the interpreter this lease holds (its last lease
  // finalizes it); false when it borrows the host's.
  bool started_by_dolsot() const { return started_by_dolsot_; }

 private:
  friend StatusOr<std::shared_ptr<InterpreterLease>> AcquireInterpreter(
      const InterpreterOptions& options);
  explicit InterpreterLease(bool started_by_dolsot) : started_by_dolsot_(started_by_dolsot) {}
  const bool started_by_dolsot_;
};

// A lease on the running interpreter, starting CPython with `options` when
// none runs. Thread-safe. kUnavailable when CPython cannot start (the
// message says why) or when called from Python code run while the
// interpreter starts or is finalized.
StatusOr<std::shared_ptr<InterpreterLease>> AcquireInterpreter(
    const InterpreterOptions& options = {});

// A snapshot, for diagnostics and tests.
struct InterpreterStatus {
  bool running = false;            // Py_IsInitialized()
  bool started_by_dolsot = false;  // dolsot started it (or is finalizing it)
  int leases = 0;                  // live leases on dolsot's interpreter
};
InterpreterStatus CurrentInterpreterStatus();

}  // namespace dolsot
