// CellWorkerPool: persistent worker threads, each with its own CPython thread
// state, that run cells for InProcessSession. A worker is reused for the next
// cell once its cell ends; a cell that never ends keeps its worker forever
// (the pool then starts another), which is what "a leaked thread" means.
#pragma once

#include <chrono>
#include <memory>

namespace dolsot {

class InterpreterLease;

// One unit of work for a worker thread.
class PoolTask {
 public:
  virtual ~PoolTask() = default;
  // Runs on the worker thread with the GIL held.
  virtual void RunHoldingGil() = 0;
  // Runs on the worker thread right after it released the GIL.
  virtual void AfterGilReleased() = 0;
};

// Thread-safe. Each worker thread holds a copy of `interpreter` (a lease,
// embedded/interpreter.h) until it has released its thread state, so the
// interpreter outlives every worker, a late cell's included.
class CellWorkerPool {
 public:
  explicit CellWorkerPool(std::shared_ptr<InterpreterLease> interpreter);
  ~CellWorkerPool();  // Shutdown()
  CellWorkerPool(const CellWorkerPool&) = delete;
  CellWorkerPool& operator=(const CellWorkerPool&) = delete;

  // Hands `task` to an idle worker (starting a new detached worker when none
  // is idle). Never blocks on the GIL. False (task dropped) after Shutdown.
  bool Submit(std::shared_ptr<PoolTask> task);
  // Stops the workers and waits until every one not inside a task has
  // released its thread state and its lease; a worker still inside a task (a
  // late cell) exits when it ends, and its lease goes with it. The pool
  // itself holds no lease after this. Call without holding the GIL.
  // Idempotent.
  void Shutdown();

  // At the host's exit, before the interpreter finalizes (call holding the
  // GIL, from an atexit callback): raises KeyboardInterrupt in every worker
  // of every pool still inside a task (a late cell, a release past its
  // deadline), every 50 ms, until none is or `budget` has passed. A worker
  // still running Python when finalization starts would be ended by CPython
  // on its next GIL take, its C++ frames unwound without the GIL. Returns how
  // many are still inside a task (0: none can).
  static int StopTasksBeforeExit(std::chrono::milliseconds budget);

  class State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace dolsot
