// CellWorkerPool: an idle worker spins briefly for its next task (a budget
// learned from its recent hand-offs, see spin_wait.h), then sleeps on a
// condition variable. A worker returns itself to the idle list before it
// reports its task done, so back-to-back cells reuse one thread.
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "backend_inprocess/cell_worker_pool.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "core/spin_wait.h"
#include "embedded/interpreter.h"

namespace dolsot {
namespace {

struct Worker {
  std::mutex mutex;
  std::condition_variable wake;
  std::shared_ptr<PoolTask> task;     // guarded by mutex
  bool stop = false;                  // guarded by mutex
  // task != nullptr || stop; written under mutex, read by the spinning worker.
  std::atomic<bool> has_work{false};
  std::atomic<std::int64_t> published_nanos{0};  // when the last task was handed over
  SpinBudget spin;                               // used by the worker thread only
};

// Makes the worker's wait end (call under worker.mutex).
void Publish(Worker& worker) {
  worker.published_nanos.store(SpinNowNanos(), std::memory_order_relaxed);
  worker.has_work.store(true, std::memory_order_release);
}

}  // namespace

class CellWorkerPool::State {
 public:
  explicit State(std::shared_ptr<InterpreterLease> interpreter)
      : interpreter_(std::move(interpreter)) {}
  bool Submit(std::shared_ptr<PoolTask> task, const std::shared_ptr<State>& self);
  void Shutdown();

 private:
  static void WorkerMain(std::shared_ptr<State> state, std::shared_ptr<Worker> worker,
                         std::shared_ptr<InterpreterLease> interpreter);
  static std::shared_ptr<PoolTask> TakeTask(Worker& worker);
  // Puts `worker` back on the idle list; false when the pool is shut down.
  bool ReturnIdle(const std::shared_ptr<Worker>& worker);
  // Counts the calling worker in or out of running a task (holding Python).
  void SetInTask(bool in_task);
  void WorkerExited();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::shared_ptr<InterpreterLease> interpreter_;  // handed to new workers; null once shut down
  std::vector<std::shared_ptr<Worker>> idle_;  // most recently used last
  int live_ = 0;     // workers started that have not exited
  int in_task_ = 0;  // workers inside RunHoldingGil (a late cell may never leave)
  bool shut_down_ = false;
};

bool CellWorkerPool::State::Submit(std::shared_ptr<PoolTask> task,
                                   const std::shared_ptr<State>& self) {
  std::shared_ptr<Worker> worker;
  std::shared_ptr<InterpreterLease> interpreter;  // set when a worker is started
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) return false;
    if (!idle_.empty()) {
      worker = std::move(idle_.back());
      idle_.pop_back();
    } else {
      worker = std::make_shared<Worker>();
      interpreter = interpreter_;
      ++live_;
    }
  }
  {
    std::lock_guard<std::mutex> lock(worker->mutex);
    worker->task = std::move(task);
    Publish(*worker);
  }
  worker->wake.notify_one();  // after unlocking: the woken worker finds the mutex free
  if (interpreter != nullptr) {
    std::thread(&State::WorkerMain, self, worker, std::move(interpreter)).detach();
  }
  return true;
}

std::shared_ptr<PoolTask> CellWorkerPool::State::TakeTask(Worker& worker) {
  SpinThenWait(worker.spin, worker.mutex, worker.wake, SpinClock::time_point::max(),
               worker.published_nanos,
               [&] { return worker.has_work.load(std::memory_order_acquire); });
  std::lock_guard<std::mutex> lock(worker.mutex);
  worker.has_work.store(worker.stop, std::memory_order_relaxed);
  return std::move(worker.task);  // nullptr: told to stop
}

bool CellWorkerPool::State::ReturnIdle(const std::shared_ptr<Worker>& worker) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shut_down_) return false;
  idle_.push_back(worker);
  return true;
}

void CellWorkerPool::State::WorkerMain(std::shared_ptr<State> state,
                                       std::shared_ptr<Worker> worker,
                                       std::shared_ptr<InterpreterLease> interpreter) {
  PyGILState_STATE gil = PyGILState_Ensure();  // this thread's own thread state
  PyThreadState* thread_state = PyEval_SaveThread();
  while (std::shared_ptr<PoolTask> task = TakeTask(*worker)) {
    state->SetInTask(true);
    PyEval_RestoreThread(thread_state);
    task->RunHoldingGil();
    thread_state = PyEval_SaveThread();
    state->SetInTask(false);
    const bool keep = state->ReturnIdle(worker);
    task->AfterGilReleased();
    if (!keep) break;
  }
  PyEval_RestoreThread(thread_state);
  PyGILState_Release(gil);
  // Without the GIL: when this is the last lease (a late cell after Close),
  // releasing it finalizes the interpreter.
  interpreter.reset();
  state->WorkerExited();
}

void CellWorkerPool::State::SetInTask(bool in_task) {
  std::lock_guard<std::mutex> lock(mutex_);
  in_task_ += in_task ? 1 : -1;
  changed_.notify_all();
}

void CellWorkerPool::State::WorkerExited() {
  std::lock_guard<std::mutex> lock(mutex_);
  --live_;
  changed_.notify_all();
}

void CellWorkerPool::State::Shutdown() {
  std::vector<std::shared_ptr<Worker>> idle;
  std::shared_ptr<InterpreterLease> interpreter;  // dropped outside the lock
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) return;
    shut_down_ = true;
    interpreter.swap(interpreter_);
    idle.swap(idle_);
  }
  for (const auto& worker : idle) {
    {
      std::lock_guard<std::mutex> lock(worker->mutex);
      worker->stop = true;
      Publish(*worker);
    }
    worker->wake.notify_one();
  }
  // Every worker not inside a task is on its way out: wait for it to release
  // its thread state and its lease. One inside a task (a late cell) is left
  // to run, holding both.
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return live_ == in_task_; });
}

CellWorkerPool::CellWorkerPool(std::shared_ptr<InterpreterLease> interpreter)
    : state_(std::make_shared<State>(std::move(interpreter))) {}
CellWorkerPool::~CellWorkerPool() { Shutdown(); }

bool CellWorkerPool::Submit(std::shared_ptr<PoolTask> task) {
  return state_->Submit(std::move(task), state_);
}

void CellWorkerPool::Shutdown() { state_->Shutdown(); }

}  // namespace dolsot
