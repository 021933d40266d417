// CellWorkerPool: an idle worker spins briefly for its next task (a budget
// learned from its recent hand-offs, see spin_wait.h), then sleeps on a
// condition variable. A worker returns itself to the idle list before it
// reports its task done, so back-to-back cells reuse one thread. Workers are
// POSIX threads with a large stack (kCellStackBytes): std::thread cannot set
// one.
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "backend_inprocess/cell_worker_pool.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/spin_wait.h"
#include "embedded/interpreter.h"

namespace dolsot {
namespace {

// A cell thread's stack. CPython's C code recurses without a bound in a few
// places (next() through a chain of map/filter/zip/itertools objects, hash()
// of nested tuples): measured on 3.10-3.13, at most ~128 bytes a level
// (map), so 512 MiB holds chains about 4 million deep; Python recursion
// through C (3.10/3.11, where the recursion limit is the only bound) costs
// 0.2-0.5 KB a level, so a recursion limit up to about a million. The stack
// is address space until touched (see TrimStack for what a deep cell
// leaves).
constexpr std::size_t kCellStackBytes = std::size_t{512} << 20;
// Stack below this distance from the thread's start is given back to the
// kernel after a task that touched it.
constexpr std::size_t kStackKeptBytes = std::size_t{8} << 20;

// This thread's stack: its lowest usable address and the address from
// which the pages below are given back after a deep task (nullptr when
// unknown).
struct StackBounds {
  char* low = nullptr;
  char* trim_below = nullptr;
};

StackBounds CurrentStackBounds() {
  StackBounds bounds;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return bounds;
  void* address = nullptr;
  std::size_t size = 0;
  std::size_t guard = 0;
  const bool known = pthread_attr_getstack(&attr, &address, &size) == 0 &&
                     pthread_attr_getguardsize(&attr, &guard) == 0;
  pthread_attr_destroy(&attr);
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  char here;
  auto top = reinterpret_cast<std::uintptr_t>(&here);
  auto low = reinterpret_cast<std::uintptr_t>(address) + guard + page;
  if (!known || size <= kStackKeptBytes * 2 || top < low + kStackKeptBytes * 2) return bounds;
  bounds.low = reinterpret_cast<char*>((low + page - 1) / page * page);
  bounds.trim_below = reinterpret_cast<char*>((top - kStackKeptBytes) / page * page);
  return bounds;
}

// After a task: when it touched the stack deeper than kStackKeptBytes (the
// page just below that line is resident), gives the pages below back, so a
// pooled thread does not keep a deep cell's hundreds of MB. One mincore()
// a task, after the host was told the result.
void TrimStack(const StackBounds& bounds) {
  if (bounds.trim_below == nullptr) return;
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  unsigned char resident = 0;
  if (mincore(bounds.trim_below - page, page, &resident) != 0 || (resident & 1) == 0) return;
  madvise(bounds.low, static_cast<std::size_t>(bounds.trim_below - bounds.low), MADV_DONTNEED);
}

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

// Every worker of every pool inside a task, by CPython thread id, so the
// host's exit can stop them (StopTasksBeforeExit).
struct BusyWorkers {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<unsigned long> thread_ids;  // one entry per worker inside a task
};

BusyWorkers& Busy() {
  static BusyWorkers* busy = new BusyWorkers;  // never destroyed: workers may outlive statics
  return *busy;
}

void NoteBusy(unsigned long thread_id, bool busy) {
  BusyWorkers& all = Busy();
  {
    std::lock_guard<std::mutex> lock(all.mutex);
    if (busy) {
      all.thread_ids.push_back(thread_id);
    } else {
      for (auto it = all.thread_ids.begin(); it != all.thread_ids.end(); ++it) {
        if (*it == thread_id) {
          all.thread_ids.erase(it);
          break;
        }
      }
    }
  }
  if (!busy) all.changed.notify_all();
}

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
  static void* WorkerEntry(void* start);  // pthread's entry: runs WorkerMain
  void StartWorker(const std::shared_ptr<State>& self, std::shared_ptr<Worker> worker,
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
  if (interpreter != nullptr) StartWorker(self, worker, std::move(interpreter));
  return true;
}

namespace {

struct WorkerStart {
  std::shared_ptr<CellWorkerPool::State> state;
  std::shared_ptr<Worker> worker;
  std::shared_ptr<InterpreterLease> interpreter;
};

}  // namespace

void* CellWorkerPool::State::WorkerEntry(void* argument) {
  std::unique_ptr<WorkerStart> start(static_cast<WorkerStart*>(argument));
  WorkerMain(std::move(start->state), std::move(start->worker), std::move(start->interpreter));
  return nullptr;
}

void CellWorkerPool::State::StartWorker(const std::shared_ptr<State>& self,
                                        std::shared_ptr<Worker> worker,
                                        std::shared_ptr<InterpreterLease> interpreter) {
  auto start = std::make_unique<WorkerStart>(WorkerStart{self, std::move(worker), std::move(interpreter)});
  // Detached, counted in live_ as before; with the large stack, or with the
  // default one when the system refuses it (strict overcommit, a low
  // RLIMIT_AS).
  for (const bool large : {true, false}) {
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) continue;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (large) pthread_attr_setstacksize(&attr, kCellStackBytes);
    pthread_t thread;
    const int failed = pthread_create(&thread, &attr, &State::WorkerEntry, start.get());
    pthread_attr_destroy(&attr);
    if (failed == 0) {
      start.release();  // the thread's now
      return;
    }
  }
  // No thread at all: the worker never takes its task (its caller times
  // out); it leaves the live count and gives its lease back.
  std::shared_ptr<Worker> orphan = std::move(start->worker);
  start.reset();
  WorkerExited();
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
  const StackBounds stack = CurrentStackBounds();
  PyGILState_STATE gil = PyGILState_Ensure();  // this thread's own thread state
  const unsigned long thread_id = PyThread_get_thread_ident();
  PyThreadState* thread_state = PyEval_SaveThread();
  while (std::shared_ptr<PoolTask> task = TakeTask(*worker)) {
    state->SetInTask(true);
    NoteBusy(thread_id, true);
    PyEval_RestoreThread(thread_state);
    task->RunHoldingGil();
    thread_state = PyEval_SaveThread();
    NoteBusy(thread_id, false);
    state->SetInTask(false);
    const bool keep = state->ReturnIdle(worker);
    task->AfterGilReleased();
    task.reset();
    TrimStack(stack);
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

int CellWorkerPool::StopTasksBeforeExit(std::chrono::milliseconds budget) {
  constexpr auto kInterval = std::chrono::milliseconds(50);
  const auto deadline = std::chrono::steady_clock::now() + budget;
  BusyWorkers& all = Busy();
  for (;;) {
    std::vector<unsigned long> running;
    {
      std::lock_guard<std::mutex> lock(all.mutex);
      running = all.thread_ids;
    }
    if (running.empty() || std::chrono::steady_clock::now() >= deadline) {
      return static_cast<int>(running.size());
    }
    for (unsigned long id : running) PyThreadState_SetAsyncExc(id, PyExc_KeyboardInterrupt);
    Py_BEGIN_ALLOW_THREADS
    {
      std::unique_lock<std::mutex> lock(all.mutex);
      all.changed.wait_for(lock, kInterval, [&] { return all.thread_ids.empty(); });
    }
    Py_END_ALLOW_THREADS
  }
}

CellWorkerPool::CellWorkerPool(std::shared_ptr<InterpreterLease> interpreter)
    : state_(std::make_shared<State>(std::move(interpreter))) {}
CellWorkerPool::~CellWorkerPool() { Shutdown(); }

bool CellWorkerPool::Submit(std::shared_ptr<PoolTask> task) {
  return state_->Submit(std::move(task), state_);
}

void CellWorkerPool::Shutdown() { state_->Shutdown(); }

}  // namespace dolsot
