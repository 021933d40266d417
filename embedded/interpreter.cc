// The interpreter's owner: one process-wide record of whether dolsot started
// the running interpreter, on which thread, and how many leases hold it; the
// start and the finalization run outside the record's lock, on the
// interpreter's main thread (dolsot's own thread unless the caller's).
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "embedded/interpreter.h"

#include <pybind11/embed.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace dolsot {
namespace {

// True when the calling thread holds the GIL (its thread state is current).
// Unlike PyGILState_Check, this stays exact once a subinterpreter exists.
bool ThisThreadHoldsTheGil() {
#if PY_VERSION_HEX >= 0x030D0000
  return PyThreadState_GetUnchecked() != nullptr;
#elif PY_VERSION_HEX >= 0x030C0000
  return _PyThreadState_UncheckedGet() != nullptr;
#else
  // Before 3.12 the current thread state is process-wide: is it this thread's?
  PyThreadState* current = _PyThreadState_UncheckedGet();
  return current != nullptr && current == PyGILState_GetThisThreadState();
#endif
}

// Starts CPython on this thread, which becomes Python's main thread, and
// returns with the GIL free (this thread keeps its thread state, which
// PyGILState_Ensure finds again).
Status StartOnThisThread(const InterpreterOptions& options) {
  const bool calling_thread = options.main_thread == PythonMainThread::kCallingThread;
  PyConfig config;
  PyConfig_InitPythonConfig(&config);  // as python3 and pybind11 start it
  config.parse_argv = 0;
  config.install_signal_handlers = calling_thread ? 1 : 0;
  PyStatus status = PyStatus_Ok();
  if (!options.program_name.empty()) {
    status = PyConfig_SetBytesString(&config, &config.program_name, options.program_name.c_str());
  }
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    return Status(ErrorCode::kUnavailable,
                  std::string("cannot start the embedded Python interpreter: ") +
                      (status.err_msg != nullptr ? status.err_msg : "unknown error") +
                      " (check PYTHONHOME and PYTHONPATH, and that the Python dolsot was built "
                      "with is installed)");
  }
  if (!calling_thread) {
    // threading takes the thread that imports it first for the main thread,
    // and joins the others at the finalization: make that this thread.
    PyObject* threading = PyImport_ImportModule("threading");
    if (threading == nullptr) PyErr_Clear();
    Py_XDECREF(threading);
  }
  PyEval_SaveThread();
  return Status::Ok();
}

// On the thread that started CPython, without the GIL: finalizes it.
// pybind11's finalize_interpreter also forgets the state pybind11 keeps per
// interpreter (the toolbox hints use pybind11), so a later interpreter does
// not inherit it.
void FinalizeOnThisThread() {
  PyGILState_Ensure();  // this thread's own (main) thread state
  pybind11::finalize_interpreter();
}

// The process-wide record. Never destroyed: a late cell's thread may release
// its lease while static destructors run.
class Owner {
 public:
  static Owner& Get() {
    static Owner* owner = new Owner();
    return *owner;
  }

  // True when the new lease counts towards dolsot's interpreter.
  StatusOr<bool> Acquire(const InterpreterOptions& options);
  void Release();
  InterpreterStatus Snapshot();

 private:
  // Of the interpreter dolsot started.
  enum class Phase { kNone, kStarting, kRunning, kFinalizing };

  // Under the lock (released while it waits). Starts CPython on dolsot's own
  // thread (kDolsotThread) or this one.
  Status Start(std::unique_lock<std::mutex>& lock, const InterpreterOptions& options);
  // Under the lock (released while it waits); the last lease is gone.
  void Finalize(std::unique_lock<std::mutex>& lock);
  // dolsot's own thread: starts CPython, waits for the word, finalizes.
  void InterpreterThreadMain(InterpreterOptions options);
  static void MarkProcessExiting();

  std::mutex mutex_;
  std::condition_variable changed_;  // any field below changed
  // All guarded by mutex_:
  Phase phase_ = Phase::kNone;
  std::thread::id transition_thread_;  // where Python code runs while starting or finalizing
  std::thread::id main_thread_;        // the interpreter's (dolsot's thread or the caller's)
  std::thread interpreter_thread_;     // dolsot's own, when it is the main thread
  bool thread_reported_ = false;       // it has tried to start CPython
  Status thread_start_status_;
  bool finalize_requested_ = false;
  int leases_ = 0;
  bool process_exiting_ = false;
  bool exit_hook_registered_ = false;
};

StatusOr<bool> Owner::Acquire(const InterpreterOptions& options) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (phase_ == Phase::kStarting || phase_ == Phase::kFinalizing) {
    if (transition_thread_ == std::this_thread::get_id()) {
      return Status(ErrorCode::kUnavailable,
                    "the embedded Python interpreter is being started or finalized; acquire it "
                    "before or after that, not from Python code run during it");
    }
    changed_.wait(lock);
  }
  if (phase_ == Phase::kRunning) {
    ++leases_;
    return true;
  }
  if (Py_IsInitialized()) return false;  // the host's
  phase_ = Phase::kStarting;
  Status started = Start(lock, options);
  transition_thread_ = std::thread::id();
  phase_ = started.ok() ? Phase::kRunning : Phase::kNone;
  if (!started.ok()) main_thread_ = std::thread::id();
  changed_.notify_all();
  if (!started.ok()) return started;
  leases_ = 1;
  if (!exit_hook_registered_) {
    exit_hook_registered_ = true;
    std::atexit(&Owner::MarkProcessExiting);
  }
  return true;
}

Status Owner::Start(std::unique_lock<std::mutex>& lock, const InterpreterOptions& options) {
  if (options.main_thread == PythonMainThread::kCallingThread) {
    main_thread_ = transition_thread_ = std::this_thread::get_id();
    lock.unlock();
    Status started = StartOnThisThread(options);
    lock.lock();
    return started;
  }
  thread_reported_ = false;
  finalize_requested_ = false;
  interpreter_thread_ = std::thread(&Owner::InterpreterThreadMain, this, options);
  main_thread_ = transition_thread_ = interpreter_thread_.get_id();
  changed_.wait(lock, [&] { return thread_reported_; });
  if (!thread_start_status_.ok()) {
    lock.unlock();
    interpreter_thread_.join();  // it has returned
    lock.lock();
  }
  return thread_start_status_;
}

void Owner::InterpreterThreadMain(InterpreterOptions options) {
  Status started = StartOnThisThread(options);
  std::unique_lock<std::mutex> lock(mutex_);
  thread_start_status_ = started;
  thread_reported_ = true;
  changed_.notify_all();
  if (!started.ok()) return;
  changed_.wait(lock, [&] { return finalize_requested_; });
  lock.unlock();
  FinalizeOnThisThread();
}

void Owner::Release() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (--leases_ > 0) return;
  // Left running when the process is exiting, when the finalization would
  // need the GIL this thread holds, or when only its main thread (the
  // caller's, which is not this one) can finalize it.
  if (process_exiting_ || ThisThreadHoldsTheGil()) return;
  if (!interpreter_thread_.joinable() && main_thread_ != std::this_thread::get_id()) return;
  Finalize(lock);
}

void Owner::Finalize(std::unique_lock<std::mutex>& lock) {
  phase_ = Phase::kFinalizing;
  transition_thread_ = main_thread_;
  if (interpreter_thread_.joinable()) {
    finalize_requested_ = true;
    changed_.notify_all();
    std::thread finalizer = std::move(interpreter_thread_);
    lock.unlock();
    finalizer.join();
  } else {  // this thread started it
    lock.unlock();
    FinalizeOnThisThread();
  }
  lock.lock();
  transition_thread_ = main_thread_ = std::thread::id();
  phase_ = Phase::kNone;
  changed_.notify_all();
}

InterpreterStatus Owner::Snapshot() {
  std::lock_guard<std::mutex> lock(mutex_);
  InterpreterStatus status;
  status.running = Py_IsInitialized() != 0;
  status.started_by_dolsot = phase_ != Phase::kNone;
  status.leases = leases_;
  return status;
}

void Owner::MarkProcessExiting() {
  Owner& owner = Get();
  std::lock_guard<std::mutex> lock(owner.mutex_);
  owner.process_exiting_ = true;
}

}  // namespace

InterpreterLease::~InterpreterLease() {
  if (started_by_dolsot_) Owner::Get().Release();
}

StatusOr<std::shared_ptr<InterpreterLease>> AcquireInterpreter(
    const InterpreterOptions& options) {
  StatusOr<bool> counted = Owner::Get().Acquire(options);
  if (!counted.ok()) return counted.status();
  return std::shared_ptr<InterpreterLease>(new InterpreterLease(*counted));
}

InterpreterStatus CurrentInterpreterStatus() { return Owner::Get().Snapshot(); }

}  // namespace dolsot
