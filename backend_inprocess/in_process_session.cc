// InProcessSession: sessions are live dicts; each cell runs through the shared
// RunCell on a pooled worker thread while the caller waits (GIL released) up
// to the deadline; a late cell is asked to stop with an asynchronous
// KeyboardInterrupt from a short-lived stopper thread.
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "backend_inprocess/in_process_session.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <optional>
#include <mutex>
#include <thread>

#include "backend_inprocess/cell_worker_pool.h"
#include "backend_inprocess/live_tools.h"
#include "backend_inprocess/namespace_release.h"
#include "core/spin_wait.h"
#include "core/cell_pipeline.h"
#include "core/live_output_stream.h"
#include "core/session_id.h"
#include "core/toolbox_name.h"
#include "embedded/cell_runner.h"
#include "embedded/cell_tools.h"
#include "embedded/gated_session.h"
#include "embedded/interpreter.h"
#include "embedded/interpreter_state.h"
#include "embedded/output_router.h"
#include "embedded/session_context.h"
#include "typecheck/type_gate_stage.h"

namespace dolsot {
namespace {

using Clock = std::chrono::steady_clock;

// A session whose timed-out cell is still running gets this long to stop
// (the asynchronous exception usually lands within milliseconds) before a
// new cell is refused with kBusy.
constexpr auto kBusyGrace = std::chrono::milliseconds(500);
// The stopper raises KeyboardInterrupt this often, this many times.
constexpr auto kStopInterval = std::chrono::milliseconds(50);
constexpr int kStopAttempts = 40;
// How often a caller's wait polls RunOptions::should_stop.
constexpr auto kStopPoll = std::chrono::milliseconds(50);

double NowEpochSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// Releases the GIL for the scope if the calling thread holds it.
class GilReleaseIfHeld {
 public:
  GilReleaseIfHeld() {
    if (Py_IsInitialized() && PyGILState_Check()) saved_ = PyEval_SaveThread();
  }
  ~GilReleaseIfHeld() {
    if (saved_ != nullptr) PyEval_RestoreThread(saved_);
  }
  GilReleaseIfHeld(const GilReleaseIfHeld&) = delete;
  GilReleaseIfHeld& operator=(const GilReleaseIfHeld&) = delete;

 private:
  PyThreadState* saved_ = nullptr;
};

// Drops a reference from any thread (takes the GIL; nothing after finalization).
void DecrefWithGil(PyObject* object) {
  if (object == nullptr || !Py_IsInitialized()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_DECREF(object);
  PyGILState_Release(gil);
}

// The "ExcType: message" of the pending Python error, which is cleared.
std::string TakePythonError() {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  std::string text = type != nullptr ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "error";
  if (value != nullptr) {
    PyObject* str = PyObject_Str(value);
    const char* utf8 = str != nullptr ? PyUnicode_AsUTF8(str) : nullptr;
    if (utf8 != nullptr && *utf8 != '\0') text += std::string(": ") + utf8;
    Py_XDECREF(str);
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  return text;
}

// What every new namespace starts with: alias -> live object (owned).
struct Injected {
  std::vector<std::pair<std::string, PyObject*>> objects;
  bool gated = false;  // the AST gate's runtime half is on (an AST gate is set)
  ~Injected() {
    for (auto& entry : objects) DecrefWithGil(entry.second);
  }
};

// A cell's tools and variables, with strong references taken while the
// caller's objects were surely alive (Run), released under the GIL.
struct CellExtras {
  CellTools tools;  // callables: owned
  std::vector<std::pair<std::string, PyObject*>> variables;  // owned
  ~CellExtras() {
    DecrefWithGil(tools.callables);
    for (auto& entry : variables) DecrefWithGil(entry.second);
  }
};

// Takes the references (with the GIL, held by the caller or not); nullptr
// when the cell has neither tools nor variables.
std::shared_ptr<const CellExtras> TakeExtras(const RunOptions& options) {
  if (options.tools.empty() && options.variables.empty()) return nullptr;
  auto extras = std::make_shared<CellExtras>();
  extras->tools.names = options.tools.names;
  extras->tools.final_name = options.tools.final_name;
  PyGILState_STATE gil = PyGILState_Ensure();
  extras->tools.callables = Py_XNewRef(options.tools.callables);
  for (const CellVariable& variable : options.variables) {
    extras->variables.emplace_back(variable.name, Py_XNewRef(variable.object));
  }
  PyGILState_Release(gil);
  return extras;
}

// Counters that outlive the InProcessSession (late cells and stoppers use them).
struct SharedCounters {
  // The session's lease, which stoppers share. Weak: a late cell's job must
  // not keep the interpreter (a job can be kept for ever by its session).
  std::weak_ptr<InterpreterLease> interpreter;
  std::atomic<int> leaked{0};
  std::mutex mutex;
  std::condition_variable stopper_exited;
  int stoppers = 0;  // guarded by mutex
  // Late cells still running, by the id of the session that ran them (a
  // reset or close does not end them: they are reported until they end).
  std::map<std::string, int, std::less<>> leaked_by_session;  // guarded by mutex

  void CountLeak(const std::string& session_id, int delta) {
    leaked.fetch_add(delta);
    std::lock_guard<std::mutex> lock(mutex);
    int& count = leaked_by_session[session_id];
    count += delta;
    if (count <= 0) leaked_by_session.erase(session_id);
  }
};

// A running cell's output, readable by the caller at the deadline, and
// handed to the caller's live stream (RunOptions::live) when there is one:
// kept here under the lock each write takes anyway, and pulled by the
// stream (LiveOutputStream::SetPull), so a write costs an append.
class LiveOutput final : public OutputSink {
 public:
  explicit LiveOutput(std::size_t max_chars) : text_(max_chars) {}
  void Write(std::string_view text) override {
    std::lock_guard<std::mutex> lock(mutex_);
    text_.Append(text);
    if (stream == nullptr) return;
    if (live_.empty()) stream->Poke();
    live_.append(text);
    if (live_.size() >= kPushBytes) PushLocked();
  }
  void Image(std::string_view png) override {
    if (stream == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    PushLocked();  // the text before it first
    stream->Image(png);
  }
  void Pull() {
    std::lock_guard<std::mutex> lock(mutex_);
    PushLocked();
  }
  std::shared_ptr<LiveOutputStream> stream;  // set before the cell starts
  std::string Text() {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_.Text();
  }

 private:
  static constexpr std::size_t kPushBytes = 64 * 1024;
  void PushLocked() {
    if (live_.empty()) return;
    stream->Text(live_);
    live_.clear();
  }
  std::mutex mutex_;
  BoundedText text_;
  std::string live_;  // written, not yet handed to the stream
};

class CellJob;

struct SessionState {
  explicit SessionState(std::string session_id) : id(std::move(session_id)) {}
  ~SessionState() {
    DecrefWithGil(globals);
    DecrefWithGil(builtins);
  }
  SessionState(const SessionState&) = delete;
  SessionState& operator=(const SessionState&) = delete;

  const std::string id;
  PyObject* globals = nullptr;  // the namespace; set once, under the GIL
  // Its own builtins (a copy of the builtins module's dict), where host tools
  // are bound for this session only; set with globals.
  PyObject* builtins = nullptr;
  SessionContext context;       // its cells' contextvars.Context (embedded/session_context.h)
  std::mutex serial;            // one Run at a time
  // Guarded by `serial`:
  int cells = 0;
  std::vector<std::string> held;
  // What the AST gate remembers of this session's cells (core/gate_memory.h).
  // No rollback here: a cell that times out runs on, so what it seals stays.
  SessionGateMemory gate_memory;
  // Set with globals in a session with an AST gate: the gate's runtime half
  // (embedded/gated_session.h).
  std::unique_ptr<GatedSession> gated;
  SpinBudget host_spin;  // the caller's wait for its cell
  // Guarded by the Impl's mutex:
  // Weak: a job holds its session while it runs, so a strong pointer here
  // made a cycle and no session (nor its namespace) was ever freed. A job
  // that still runs (late, on a leaked thread) is held by its pool thread.
  std::weak_ptr<CellJob> last_job;
  double last_used = 0.0;
};

// Creates the session's namespace on first use. Needs the GIL.
bool EnsureGlobals(SessionState& session, const Injected& injected) {
  if (session.globals != nullptr) return true;
  PyObject* globals = PyDict_New();
  if (globals == nullptr) return false;
  PyObject* module = PyImport_ImportModule("builtins");
  PyObject* builtins = module != nullptr ? PyDict_Copy(PyModule_GetDict(module)) : nullptr;
  Py_XDECREF(module);
  bool ok = builtins != nullptr && PyDict_SetItemString(globals, "__builtins__", builtins) == 0;
  std::unique_ptr<GatedSession> guard;
  if (ok && injected.gated) {
    StatusOr<std::unique_ptr<GatedSession>> made = GatedSession::Create(globals, builtins);
    if (!made.ok()) PyErr_SetString(PyExc_RuntimeError, made.status().message().c_str());
    ok = made.ok() && (guard = std::move(made).value()) != nullptr;
  }
  for (const auto& [alias, object] : injected.objects) {
    if (!ok) break;
    PyObject* bound = injected.gated ? GatedSession::Bind(object) : Py_NewRef(object);  // a view if gated
    ok = bound != nullptr && PyDict_SetItemString(globals, alias.c_str(), bound) == 0;
    Py_XDECREF(bound);
  }
  if (!ok) {
    Py_DECREF(globals);
    Py_XDECREF(builtins);
    return false;
  }
  if (session.globals == nullptr) {
    session.globals = globals;
    session.builtins = builtins;
    session.gated = std::move(guard);
  } else {
    Py_DECREF(globals);  // someone else won the race while we allocated
    Py_DECREF(builtins);
  }
  return true;
}

class CellJob final : public PoolTask {
 public:
  CellJob(std::shared_ptr<SessionState> session, std::shared_ptr<const Injected> injected,
          std::shared_ptr<SharedCounters> counters, CellRequest request, std::string code,
          std::shared_ptr<const CellExtras> extras)
      : session_(std::move(session)),
        injected_(std::move(injected)),
        counters_(std::move(counters)),
        extras_(std::move(extras)),
        code_(std::move(code)),
        request_(std::move(request)),
        output_(request_.max_output) {
    request_.code = code_;
    request_.sink = &output_;
  }

  void RunHoldingGil() override {
    thread_ident_ = PyThread_get_thread_ident();
    if (stop_requested_.load()) {
      result_.ok = false;  // timed out before it could start: never run it
    } else if (!EnsureGlobals(*session_, *injected_)) {
      result_.ok = false;
      result_.exit_code = kExitFailure;
      result_.error = "internal: cannot create the session namespace: " + TakePythonError();
    } else if (Status bound = BindExtras(); !bound.ok()) {
      result_ = Result::Failure(Outcome::kError, kExitFailure, bound.message());
      result_.error_type = "TypeError";
    } else if (SessionContextScope context(session_->context); !context.entered()) {
      result_ = Result::Failure(Outcome::kError, kExitFailure,
                                "internal: cannot enter the session's context: " + TakePythonError());
    } else {
      InterpreterStateGuard interpreter_state;  // embedded/interpreter_state.h
      PyObject* returned = nullptr;
      request_.returned = &returned;
      GatedSession::CellScope gated_cell(session_->gated.get());
      result_ = RunCell(session_->globals, request_);
      if (returned != nullptr) {
        result_.returned.emplace();
        result_.returned->object = HoldPyObject(returned);
        Py_DECREF(returned);
      }
    }
    python_finished_ = true;
    // A KeyboardInterrupt the stopper raised too late must not hit the next cell.
    if (stop_requested_.load()) PyThreadState_SetAsyncExc(thread_ident_, nullptr);
  }

  // The host is told only now, so the woken host does not block on the GIL;
  // it is notified after the mutex is released, so it does not block on that.
  void AfterGilReleased() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
      done_nanos_.store(SpinNowNanos(), std::memory_order_relaxed);
      done_flag_.store(true, std::memory_order_release);
      if (timed_out_) counters_->CountLeak(session_->id, -1);
    }
    finished_.notify_all();  // the worker holds this job, so it is alive
  }

  bool Done() const { return done_flag_.load(std::memory_order_acquire); }

  // Waits until the cell is done or `deadline` passes; true when done.
  bool WaitUntil(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    return finished_.wait_until(lock, deadline, [&] { return done_; });
  }

  // The caller's wait for its cell: spins for up to `spin`'s budget (which
  // learns from this hand-off), then sleeps until the cell is done, the
  // deadline passes or an interrupt is asked for (RequestInterrupt, or
  // `should_stop`, polled every kStopPoll). True when done.
  bool WaitForResult(Clock::time_point deadline, SpinBudget& spin, const StopCheck& should_stop) {
    auto ready = [&] {
      return done_flag_.load(std::memory_order_acquire) ||
             interrupt_requested_.load(std::memory_order_acquire);
    };
    Clock::time_point slice = should_stop ? std::min(deadline, Clock::now() + kStopPoll) : deadline;
    SpinThenWait(spin, mutex_, finished_, slice, done_nanos_, ready);
    while (!ready() && Clock::now() < deadline) {
      if (should_stop && should_stop()) {
        interrupt_requested_.store(true);
        break;
      }
      std::unique_lock<std::mutex> lock(mutex_);
      finished_.wait_until(lock, should_stop ? std::min(deadline, Clock::now() + kStopPoll)
                                             : deadline, ready);
    }
    return Done();
  }

  // Interrupt(): wakes the caller's wait, which then stops the cell.
  void RequestInterrupt() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      interrupt_requested_.store(true, std::memory_order_release);
    }
    finished_.notify_all();
  }
  bool InterruptRequested() const { return interrupt_requested_.load(); }

  // At the deadline or an interrupt: marks the cell late (counted as a
  // leaked thread until it ends). False when it finished after all.
  bool MarkTimedOut() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return false;
    timed_out_ = true;
    stop_requested_.store(true);
    counters_->CountLeak(session_->id, 1);
    return true;
  }

  // Raises KeyboardInterrupt in the cell's thread until it ends (bounded).
  // When the cell ended, returns only once its worker is out of the task, so
  // a Close that waited for the stoppers finds that worker leaving the pool.
  // Runs on its own thread; takes the GIL.
  void Stop() {
    PyGILState_STATE gil = PyGILState_Ensure();
    for (int attempt = 0; attempt < kStopAttempts && !python_finished_; ++attempt) {
      if (thread_ident_ != 0) PyThreadState_SetAsyncExc(thread_ident_, PyExc_KeyboardInterrupt);
      Py_BEGIN_ALLOW_THREADS
      WaitUntil(Clock::now() + kStopInterval);
      Py_END_ALLOW_THREADS
    }
    const bool finished = python_finished_;
    PyGILState_Release(gil);
    if (finished) {  // done_ follows at once: the worker only releases the GIL
      std::unique_lock<std::mutex> lock(mutex_);
      finished_.wait(lock, [&] { return done_; });
    }
  }

  Result TakeResult() { return std::move(result_); }  // after Done()

  // Binds the session's tools (removing ones no longer given) and this cell's
  // variables. Needs the GIL.
  Status BindExtras() {
    static const CellTools kNoTools;
    const CellTools* tools = extras_ ? &extras_->tools : &kNoTools;
    CellTools flushing;  // live output: a tool runs once what came before it is delivered
    if (output_.stream != nullptr && tools->callables != nullptr) {
      flushing = *tools;
      flushing.callables = ToolsFlushingOutputFirst(tools->callables, output_.stream);
      if (flushing.callables == nullptr) return InternalError("cannot bind tools: " + TakePythonError());
      tools = &flushing;
    }
    Status bound = BindCellTools(session_->builtins, *tools, nullptr);
    Py_XDECREF(flushing.callables);
    DOLSOT_RETURN_IF_ERROR(bound);
    if (!extras_) return Status::Ok();
    for (const auto& [name, object] : extras_->variables) {
      if (object != nullptr && PyDict_SetItemString(session_->globals, name.c_str(), object) < 0) {
        return Status(ErrorCode::kInternal, "cannot bind variable '" + name + "': " +
                                                TakePythonError());
      }
    }
    return Status::Ok();
  }
  std::string PartialOutput() { return output_.Text(); }
  void StreamTo(std::shared_ptr<LiveOutputStream> stream) {
    stream->SetPull([this] { output_.Pull(); });  // cleared by the stream's Finish
    output_.stream = std::move(stream);
  }

 private:
  std::shared_ptr<SessionState> session_;
  std::shared_ptr<const Injected> injected_;
  std::shared_ptr<SharedCounters> counters_;
  std::shared_ptr<const CellExtras> extras_;
  std::string code_;
  CellRequest request_;
  LiveOutput output_;
  Result result_;
  // Guarded by the GIL:
  unsigned long thread_ident_ = 0;
  bool python_finished_ = false;
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> interrupt_requested_{false};
  std::atomic<bool> done_flag_{false};     // done_, readable without the mutex
  std::atomic<std::int64_t> done_nanos_{0};  // when done_ was set
  std::mutex mutex_;
  std::condition_variable finished_;
  bool done_ = false;       // guarded by mutex_
  bool timed_out_ = false;  // guarded by mutex_
};

// The stopper holds a lease while it touches Python. None is left when the
// session is closed and its workers are gone: then the cell has ended.
void StartStopper(std::shared_ptr<CellJob> job, std::shared_ptr<SharedCounters> counters) {
  std::shared_ptr<InterpreterLease> interpreter = counters->interpreter.lock();
  if (interpreter == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(counters->mutex);
    ++counters->stoppers;
  }
  std::thread([job = std::move(job), counters = std::move(counters),
               interpreter = std::move(interpreter)]() mutable {
    job->Stop();
    job.reset();          // Python references go while the interpreter runs
    interpreter.reset();  // without the GIL: releasing the last lease finalizes
    std::lock_guard<std::mutex> lock(counters->mutex);
    --counters->stoppers;
    counters->stopper_exited.notify_all();
  }).detach();
}

std::string FormatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

}  // namespace

class InProcessSession::Impl {
 public:
  explicit Impl(std::shared_ptr<InterpreterLease> lease)
      : interpreter(std::move(lease)), pool(interpreter) {
    counters->interpreter = interpreter;
  }

  // First, so it is released last; Close releases it. The pool's workers and
  // the stoppers hold copies until they end.
  std::shared_ptr<InterpreterLease> interpreter;
  Config config;
  CellPipeline pipeline;
  std::shared_ptr<const Injected> injected;
  std::vector<std::string> aliases;
  CellWorkerPool pool;
  std::shared_ptr<SharedCounters> counters = std::make_shared<SharedCounters>();

  StatusOr<std::shared_ptr<SessionState>> FindOrCreate(std::string_view session_id);
  Status WaitForPreviousCell(SessionState& session);
  // The run, once the pipeline admitted the cell.
  Result RunOnWorker(const std::shared_ptr<SessionState>& session, std::string_view code,
                     double timeout, Clock::time_point deadline, const StopCheck& should_stop,
                     std::shared_ptr<const CellExtras> extras, const OutputCallbacks& live);
  void Interrupt(std::string_view session_id);
  std::vector<std::shared_ptr<SessionState>> TakeSessions(std::string_view target);
  // Forgets `taken`: what only they hold is dropped on a worker, bounded by
  // the timeout (backend_inprocess/namespace_release.h). Without the GIL.
  void ReleaseSessions(std::vector<std::shared_ptr<SessionState>> taken);

  std::mutex mutex;  // never held while taking the GIL
  std::map<std::string, std::shared_ptr<SessionState>, std::less<>> sessions;
  bool closed = false;
};

StatusOr<std::shared_ptr<SessionState>> InProcessSession::Impl::FindOrCreate(
    std::string_view session_id) {
  std::lock_guard<std::mutex> lock(mutex);
  if (closed) return Status(ErrorCode::kUnavailable, "this InProcessSession is closed");
  auto found = sessions.find(session_id);
  if (found != sessions.end()) return found->second;
  auto session = std::make_shared<SessionState>(std::string(session_id));
  session->last_used = NowEpochSeconds();
  sessions.emplace(session->id, session);
  return session;
}

Status InProcessSession::Impl::WaitForPreviousCell(SessionState& session) {
  std::shared_ptr<CellJob> previous;
  {
    std::lock_guard<std::mutex> lock(mutex);
    previous = session.last_job.lock();
  }
  if (previous == nullptr || previous->Done()) return Status::Ok();
  if (previous->WaitUntil(Clock::now() + kBusyGrace)) return Status::Ok();
  return Status(ErrorCode::kBusy,
                "session '" + session.id +
                    "' is still running an earlier cell that timed out and did not stop "
                    "(stuck in C code?); reset it to start over with a fresh namespace");
}

Result InProcessSession::Impl::RunOnWorker(const std::shared_ptr<SessionState>& session,
                                           std::string_view code, double timeout,
                                           Clock::time_point deadline,
                                           const StopCheck& should_stop,
                                           std::shared_ptr<const CellExtras> extras,
                                           const OutputCallbacks& live) {
  CellRequest request;
  // Unique per session: linecache keeps each cell's source under this name.
  // Tracebacks show the session's own cells as "<cell N>", as a Repl does.
  request.session_tag = " of " + session->id;
  request.filename = "<cell " + std::to_string(++session->cells) + request.session_tag + ">";
  request.max_output = config.max_output;
  request.max_repr = config.max_repr;
  request.hidden_names = aliases;
  request.toolbox_aliases = aliases;
  auto job = std::make_shared<CellJob>(session, injected, counters, std::move(request),
                                       std::string(code), std::move(extras));
  // Delivered on the stream's own thread; finished before this returns, so
  // a late cell's output never reaches the caller's callbacks.
  auto stream = live.empty() ? nullptr : std::make_shared<LiveOutputStream>(live, config.max_output);
  struct FinishStream {
    LiveOutputStream* stream;
    ~FinishStream() { if (stream != nullptr) stream->Finish(); }
  } finish_stream{stream.get()};
  if (stream != nullptr) job->StreamTo(stream);
  {
    std::lock_guard<std::mutex> lock(mutex);
    session->last_job = job;
  }
  if (!pool.Submit(job)) {
    return Result::Failure(Outcome::kWorkerLost, kExitFailure, "this InProcessSession is closed",
                           session->held);
  }
  Result result;
  if (job->WaitForResult(deadline, session->host_spin, should_stop) || !job->MarkTimedOut()) {
    result = job->TakeResult();
    session->held = result.held;
  } else if (job->InterruptRequested()) {
    StartStopper(job, counters);
    result = Result::Failure(
        Outcome::kInterrupted, kExitInterrupted,
        "KeyboardInterrupt: the cell was interrupted (a cell stuck in C code keeps running on "
        "a leaked thread, and its session refuses new cells until reset)",
        session->held);
    result.stdout_text = job->PartialOutput();
  } else {
    StartStopper(job, counters);
    result = Result::Failure(
        Outcome::kTimeout, kExitTimeout,
        "TimeoutError: the cell ran past its " + FormatSeconds(timeout) +
            " s timeout; it was interrupted (a cell stuck in C code keeps running on "
            "a leaked thread, and its session refuses new cells until reset)",
        session->held);
    result.stdout_text = job->PartialOutput();
  }
  std::lock_guard<std::mutex> lock(mutex);
  session->last_used = NowEpochSeconds();
  return result;
}

void InProcessSession::Impl::Interrupt(std::string_view session_id) {
  std::shared_ptr<CellJob> job;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = sessions.find(session_id);
    if (found != sessions.end()) job = found->second->last_job.lock();
  }
  if (job != nullptr && !job->Done()) job->RequestInterrupt();
}

std::vector<std::shared_ptr<SessionState>> InProcessSession::Impl::TakeSessions(
    std::string_view target) {
  std::vector<std::shared_ptr<SessionState>> taken;
  std::lock_guard<std::mutex> lock(mutex);
  if (target == kAllSessions) {
    for (auto& entry : sessions) taken.push_back(std::move(entry.second));
    sessions.clear();
  } else if (auto found = sessions.find(target); found != sessions.end()) {
    taken.push_back(std::move(found->second));
    sessions.erase(found);
  }
  return taken;
}

void InProcessSession::Impl::ReleaseSessions(std::vector<std::shared_ptr<SessionState>> taken) {
  std::vector<HeldByForgottenSession> held;
  std::string ids;  // a late release is listed in LeakedCells under these
  for (std::shared_ptr<SessionState>& session : taken) {
    std::shared_ptr<CellJob> job;
    {
      std::lock_guard<std::mutex> lock(mutex);
      job = session->last_job.lock();
    }
    if (job != nullptr && !job->Done()) continue;  // a late cell runs in it: its thread drops it
    ids += (ids.empty() ? "" : ",") + session->id;
    held.push_back({session->context.Release(), {session->globals, session->builtins}});
    session->globals = session->builtins = nullptr;
  }
  taken.clear();
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(config.timeout_seconds));
  ReleaseOnWorker(pool, interpreter, std::move(held), deadline,
                  [counters = counters, ids](int delta) { counters->CountLeak(ids, delta); });
}

namespace {

// Imports the toolboxes and takes references to the live objects. Needs the GIL.
Status CollectInjected(const InProcessOptions& options, Injected& injected,
                       std::map<std::string, std::string>& modules) {
  auto add = [&](const std::string& alias, PyObject* object) -> Status {
    DOLSOT_RETURN_IF_ERROR(ValidateToolboxAlias(alias));
    for (const auto& existing : injected.objects) {
      if (existing.first == alias) {
        return Status(ErrorCode::kInvalidToolbox, "inject alias '" + alias + "' is given twice");
      }
    }
    if (PyUnicode_Check(object)) {
      PyObject* module = PyImport_Import(object);
      if (module == nullptr) {
        return Status(ErrorCode::kInvalidToolbox, "toolbox '" + alias + "' (module '" +
                                                      PyUnicode_AsUTF8(object) +
                                                      "') does not import: " + TakePythonError());
      }
      object = module;
    } else {
      Py_INCREF(object);
    }
    injected.objects.emplace_back(alias, object);
    if (PyModule_Check(object)) {
      const char* name = PyModule_GetName(object);
      if (name != nullptr) modules[alias] = name;
      PyErr_Clear();
    }
    return Status::Ok();
  };
  for (const auto& [alias, module_name] : options.toolboxes) {
    DOLSOT_RETURN_IF_ERROR(ValidateToolboxModule(alias, module_name));
    PyObject* name = PyUnicode_FromString(module_name.c_str());
    if (name == nullptr) {
      return Status(ErrorCode::kInvalidToolbox, "toolbox '" + alias + "': " + TakePythonError());
    }
    Status status = add(alias, name);
    Py_DECREF(name);
    DOLSOT_RETURN_IF_ERROR(status);
  }
  for (const auto& [alias, object] : options.objects) {
    if (object == nullptr) {
      return Status(ErrorCode::kInvalidToolbox, "inject value for '" + alias + "' is null");
    }
    DOLSOT_RETURN_IF_ERROR(add(alias, object));
  }
  return Status::Ok();
}

// sys.path and sys.executable, for the type gate. Needs the GIL.
void ReadInterpreterPaths(std::vector<std::string>& path, std::string& executable) {
  PyObject* sys_path = PySys_GetObject("path");  // borrowed
  if (sys_path != nullptr && PyList_Check(sys_path)) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(sys_path); ++i) {
      PyObject* entry = PyList_GET_ITEM(sys_path, i);
      const char* text = PyUnicode_Check(entry) ? PyUnicode_AsUTF8(entry) : nullptr;
      if (text != nullptr) path.emplace_back(text);
    }
  }
  PyObject* sys_executable = PySys_GetObject("executable");
  const char* text = sys_executable != nullptr && PyUnicode_Check(sys_executable)
                         ? PyUnicode_AsUTF8(sys_executable)
                         : nullptr;
  if (text != nullptr) executable = text;
  PyErr_Clear();
}

}  // namespace

StatusOr<std::unique_ptr<InProcessSession>> InProcessSession::Create(InProcessOptions options) {
  StatusOr<Config> config = ResolveConfig(options.config);
  if (!config.ok()) return config.status();
  StatusOr<std::shared_ptr<InterpreterLease>> lease = AcquireInterpreter();
  if (!lease.ok()) return lease.status();
  auto impl = std::make_unique<Impl>(std::move(lease).value());
  impl->config = *config;
  PyGILState_STATE gil = PyGILState_Ensure();
  auto injected = std::make_shared<Injected>();
  TypeGateSettings type_gate;
  Status status = CollectInjected(options, *injected, type_gate.toolboxes);
  if (status.ok()) status = InstallCellIo();
  injected->gated = options.ast_gate != nullptr;
  if (status.ok() && injected->gated) status = InstallRuntimeGuard();
  ReadInterpreterPaths(type_gate.python_path, type_gate.python_executable);
  PyGILState_Release(gil);
  if (!status.ok()) {
    injected.reset();
    return status;  // the lease goes with impl (the last one finalizes)
  }
  for (const auto& entry : injected->objects) impl->aliases.push_back(entry.first);
  GateSet gates;
  gates.ast_gate = std::move(options.ast_gate);
  gates.caller_gate = std::move(options.gate);
  if (impl->config.typecheck) {
    type_gate.ty_bin = impl->config.ty_bin;
    AddTypeGate(gates, std::move(type_gate));
  }
  impl->pipeline = CellPipeline(std::move(gates));
  impl->injected = std::move(injected);
  return std::unique_ptr<InProcessSession>(new InProcessSession(std::move(impl)));
}

InProcessSession::InProcessSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

InProcessSession::~InProcessSession() { (void)Close(); }

const Capabilities& InProcessSession::capabilities() const {
  static const Capabilities kInProcess = [] {
    Capabilities c;
    c.live_objects = true;
    c.tools = true;
    return c;
  }();
  return kInProcess;
}

StatusOr<Result> InProcessSession::Run(std::string_view session_id, std::string_view code,
                                       const RunOptions& options) {
  DOLSOT_RETURN_IF_ERROR(ValidateRunRequest(session_id, code, options));
  double timeout = impl_->config.timeout_seconds;
  if (options.timeout_seconds) {
    DOLSOT_RETURN_IF_ERROR(CheckTimeout(*options.timeout_seconds, "timeout"));
    timeout = *options.timeout_seconds;
  }
  std::shared_ptr<const CellExtras> extras = TakeExtras(options);
  GilReleaseIfHeld unlocked;
  // 1. The session, ready (its previous cell done).
  StatusOr<std::shared_ptr<SessionState>> session = impl_->FindOrCreate(session_id);
  if (!session.ok()) return session.status();
  std::unique_lock<std::mutex> serial((*session)->serial);
  DOLSOT_RETURN_IF_ERROR(impl_->WaitForPreviousCell(**session));
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout));
  // 2. The gates; 3. the run.
  // The gates see the names this cell starts with: the session's, and its
  // variables and tools (bound just before it runs).
  std::vector<std::string> names_in_scope;
  if (extras != nullptr) names_in_scope = NamesInScope((*session)->held, options.tools, options.variables);
  const GateRequest gate_request{code, extras != nullptr ? names_in_scope : (*session)->held,
                                 deadline};
  StatusOr<Result> result = impl_->pipeline.Run(gate_request, (*session)->gate_memory, [&] {
    return impl_->RunOnWorker(*session, code, timeout, deadline, options.should_stop,
                              std::move(extras), options.live);
  });
  if (result.ok()) result->max_text = impl_->config.max_text;
  return result;
}

Status InProcessSession::Interrupt(std::string_view session_id) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(session_id));
  impl_->Interrupt(session_id);
  return Status::Ok();
}

StatusOr<std::vector<SessionInfo>> InProcessSession::Sessions() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::vector<SessionInfo> out;
  for (const auto& [id, session] : impl_->sessions) {
    SessionInfo info;
    info.id = id;
    info.last_used = session->last_used;
    out.push_back(std::move(info));
  }
  return out;
}

StatusOr<int> InProcessSession::Reset(std::string_view session_id_or_all) {
  DOLSOT_RETURN_IF_ERROR(ValidateResetTarget(session_id_or_all));
  GilReleaseIfHeld unlocked;
  std::vector<std::shared_ptr<SessionState>> taken = impl_->TakeSessions(session_id_or_all);
  const int count = static_cast<int>(taken.size());
  impl_->ReleaseSessions(std::move(taken));  // outside the mutex, on a worker
  return count;
}

Status InProcessSession::Close() {
  if (impl_ == nullptr) return Status::Ok();
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->closed) return Status::Ok();
    impl_->closed = true;
  }
  {
    GilReleaseIfHeld unlocked;
    {
      // Late cells get their stopper's whole budget to stop first. Stoppers
      // end within kStopAttempts * kStopInterval, unless a cell holds the GIL
      // for ever in C code; do not wait for ever on that.
      std::unique_lock<std::mutex> lock(impl_->counters->mutex);
      impl_->counters->stopper_exited.wait_for(lock, kStopInterval * (kStopAttempts + 10),
                                               [&] { return impl_->counters->stoppers == 0; });
    }
    impl_->ReleaseSessions(impl_->TakeSessions(kAllSessions));
    impl_->pool.Shutdown();
    impl_->injected.reset();
  }
  // After the GIL is back with a caller that held it (then nothing is
  // finalized now; see embedded/interpreter.h). Releasing the last lease
  // finalizes the interpreter dolsot started; a cell stuck in C code holds
  // one for its thread, and then its thread's release does, once it ends.
  impl_->interpreter.reset();
  return Status::Ok();
}

StatusOr<PyObject*> InProcessSession::Namespace(std::string_view session_id) {
  DOLSOT_RETURN_IF_ERROR(ValidateSessionId(session_id));
  StatusOr<std::shared_ptr<SessionState>> session = impl_->FindOrCreate(session_id);
  if (!session.ok()) return session.status();
  if (!EnsureGlobals(**session, *impl_->injected)) {
    return InternalError("cannot create the session namespace: " + TakePythonError());
  }
  Py_INCREF((*session)->globals);
  return (*session)->globals;
}

int InProcessSession::LeakedThreads() const { return impl_->counters->leaked.load(); }

std::map<std::string, int> InProcessSession::LeakedCells() const {
  std::lock_guard<std::mutex> lock(impl_->counters->mutex);
  return {impl_->counters->leaked_by_session.begin(), impl_->counters->leaked_by_session.end()};
}

}  // namespace dolsot
