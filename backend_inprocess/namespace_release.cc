// ReleaseOnWorker (see namespace_release.h): a PoolTask that drops the
// references, waited for like a cell, stopped like a late cell.
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "backend_inprocess/namespace_release.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "backend_inprocess/cell_worker_pool.h"
#include "embedded/interpreter.h"

namespace dolsot {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kStopInterval = std::chrono::milliseconds(50);
constexpr int kStopAttempts = 40;

// Deletes a dict's entries, the newest first, so a finalizer that runs
// meanwhile still finds the names bound before its object (an injected
// object, a helper defined earlier).
void EmptyNewestFirst(PyObject* dict) {
  PyObject* keys = PyDict_Keys(dict);
  if (keys == nullptr) return PyErr_Clear();
  for (Py_ssize_t i = PyList_GET_SIZE(keys) - 1; i >= 0; --i) {
    if (PyDict_DelItem(dict, PyList_GET_ITEM(keys, i)) < 0) PyErr_Clear();
  }
  Py_DECREF(keys);
  PyDict_Clear(dict);
}

// Drops the references (needs the GIL).
void DropHeld(std::vector<HeldByForgottenSession>& held) {
  for (HeldByForgottenSession& session : held) {
    const bool entered = session.context != nullptr && PyContext_Enter(session.context) == 0;
    if (session.context != nullptr && !entered) PyErr_Clear();
    for (PyObject*& object : session.objects) {
      // A namespace is in a cycle with every function defined in it
      // (__globals__): emptied first, what only it held goes now, here,
      // rather than in a later gc.collect() on whichever thread runs it.
      if (object != nullptr && PyDict_CheckExact(object)) EmptyNewestFirst(object);
      Py_CLEAR(object);
    }
    if (entered && PyContext_Exit(session.context) < 0) PyErr_Clear();
    Py_CLEAR(session.context);
  }
  held.clear();
}

class ReleaseTask final : public PoolTask {
 public:
  ReleaseTask(std::vector<HeldByForgottenSession> held, std::function<void(int)> count_late)
      : held_(std::move(held)), count_late_(std::move(count_late)) {}
  ~ReleaseTask() override {
    if (!held_.empty() && Py_IsInitialized()) {  // never handed to a worker
      PyGILState_STATE gil = PyGILState_Ensure();
      DropHeld(held_);
      PyGILState_Release(gil);
    }
  }

  void RunHoldingGil() override {
    thread_ident_ = PyThread_get_thread_ident();
    DropHeld(held_);
    if (PyErr_Occurred()) PyErr_Clear();
    finished_ = true;
    // A KeyboardInterrupt the stopper raised too late must not hit the next cell.
    if (late_.load()) PyThreadState_SetAsyncExc(thread_ident_, nullptr);
  }

  void AfterGilReleased() override {
    bool late = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
      late = late_.load();
    }
    if (late && count_late_) count_late_(-1);
    changed_.notify_all();
  }

  // True when done by `deadline`; else marks the release late (counted).
  bool WaitUntil(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (changed_.wait_until(lock, deadline, [&] { return done_; })) return true;
    late_.store(true);
    if (count_late_) count_late_(+1);
    return false;
  }

  // Raises KeyboardInterrupt in the worker until the release ends (bounded).
  void Stop() {
    PyGILState_STATE gil = PyGILState_Ensure();
    for (int attempt = 0; attempt < kStopAttempts && !finished_; ++attempt) {
      if (thread_ident_ != 0) PyThreadState_SetAsyncExc(thread_ident_, PyExc_KeyboardInterrupt);
      Py_BEGIN_ALLOW_THREADS
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait_for(lock, kStopInterval, [&] { return done_; });
      }
      Py_END_ALLOW_THREADS
    }
    PyGILState_Release(gil);
  }

 private:
  std::vector<HeldByForgottenSession> held_;  // touched under the GIL only
  std::function<void(int)> count_late_;
  unsigned long thread_ident_ = 0;  // guarded by the GIL
  bool finished_ = false;           // guarded by the GIL
  std::atomic<bool> late_{false};
  std::mutex mutex_;
  std::condition_variable changed_;
  bool done_ = false;  // guarded by mutex_
};

}  // namespace

bool ReleaseOnWorker(CellWorkerPool& pool, std::weak_ptr<InterpreterLease> interpreter,
                     std::vector<HeldByForgottenSession> held, Clock::time_point deadline,
                     std::function<void(int)> count_late) {
  if (held.empty()) return true;
  auto task = std::make_shared<ReleaseTask>(std::move(held), std::move(count_late));
  if (!pool.Submit(task)) return true;  // shut down: the task's destructor drops them here
  if (task->WaitUntil(deadline)) return true;
  std::shared_ptr<InterpreterLease> lease = interpreter.lock();
  if (lease != nullptr) {
    std::thread([task = std::move(task), lease = std::move(lease)]() mutable {
      task->Stop();
      task.reset();
      lease.reset();  // without the GIL: releasing the last lease finalizes
    }).detach();
  }
  return false;
}

}  // namespace dolsot
