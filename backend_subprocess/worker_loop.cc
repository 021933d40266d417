// The fork server loop: handshake, toolbox imports, session forks, and the
// cleanup that leaves no process behind when the host goes away.
#include <Python.h>

#include "backend_subprocess/worker_loop.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backend_subprocess/engine_fork.h"
#include "backend_subprocess/exit_records.h"
#include "backend_subprocess/namespaced_pids.h"
#include "backend_subprocess/protocol.h"
#include "backend_subprocess/session_keeper.h"
#include "backend_subprocess/session_process.h"
#include "backend_subprocess/shared_heap.h"
#include "backend_subprocess/worker_sandbox.h"
#include "backend_subprocess/worker_settings.h"
#include "embedded/cell_figures.h"
#include "embedded/cell_runner.h"
#include "embedded/output_router.h"
#include "embedded/read_only_cell.h"
#include "embedded/huge_page_arenas.h"

namespace dolsot {
namespace {

using protocol::Frame;
using protocol::PayloadWriter;
using protocol::Tag;

// The current Python exception as one line, clearing it.
std::string FetchPythonError() {
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  std::string text = "unknown error";
  if (value != nullptr) {
    PyObject* s = PyObject_Str(value);
    const char* name = type ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "Error";
    text = name;
    if (s != nullptr) {
      const char* utf8 = PyUnicode_AsUTF8(s);
      if (utf8 != nullptr && *utf8 != '\0') text += std::string(": ") + utf8;
      Py_DECREF(s);
    }
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  return text;
}

// sys.path = [cwd] + python_path (or, when none is given, the interpreter's own entries).
Status SetSysPath(const WorkerSettings& s) {
  PyObject* path = PySys_GetObject("path");  // borrowed
  if (path == nullptr || !PyList_Check(path)) return InternalError("sys.path is not a list");
  PyObject* fresh = PyList_New(0);
  auto append = [&](const std::string& entry) {
    PyObject* item = PyUnicode_DecodeFSDefaultAndSize(entry.data(), entry.size());
    if (item == nullptr) return false;
    int rc = PyList_Append(fresh, item);
    Py_DECREF(item);
    return rc == 0;
  };
  bool ok = append(s.cwd);
  if (!s.python_path.empty()) {
    for (const auto& entry : s.python_path) {
      if (entry.empty() || entry == s.cwd) continue;
      ok = ok && append(entry);
    }
  } else {
    Py_ssize_t n = PyList_Size(path);
    // An embedded interpreter's sys.path has no script directory: every entry
    // (PYTHONPATH first) is kept, after the cwd.
    for (Py_ssize_t i = 0; i < n && ok; ++i) {
      PyObject* entry = PyList_GetItem(path, i);  // borrowed
      const char* text = PyUnicode_Check(entry) ? PyUnicode_AsUTF8(entry) : nullptr;
      if (text == nullptr) PyErr_Clear();
      if (text != nullptr && (s.cwd == text || *text == '\0')) continue;
      ok = PyList_Append(fresh, entry) == 0;
    }
  }
  if (ok) ok = PyList_SetSlice(path, 0, PyList_Size(path), fresh) == 0;
  Py_DECREF(fresh);
  if (!ok) return InternalError("setting sys.path: " + FetchPythonError());
  return Status::Ok();
}

// Imports every toolbox and binds it in __main__ under its alias. The host
// hears of each import first, so a toolbox that kills the process (os._exit,
// a crash in an extension) or hangs is named in the host's error.
Status ImportToolboxes(int host, const WorkerSettings& s) {
  PyObject* globals = PyModule_GetDict(PyImport_AddModule("__main__"));
  for (const auto& [alias, module_name] : s.toolboxes) {
    PayloadWriter importing;
    importing.Str(alias).Str(module_name);
    DOLSOT_RETURN_IF_ERROR(protocol::WriteFrame(host, Tag::kImporting, importing.data()));
    PyObject* module = PyImport_ImportModule(module_name.c_str());
    if (module == nullptr) {
      return Status(ErrorCode::kInvalidToolbox, "toolbox '" + alias + "': cannot import '" +
                                                    module_name + "': " + FetchPythonError());
    }
    int rc = PyDict_SetItemString(globals, alias.c_str(), module);
    Py_DECREF(module);
    if (rc != 0) return InternalError("binding toolbox '" + alias + "': " + FetchPythonError());
  }
  return Status::Ok();
}

// Every descendant of this process, from /proc.
std::set<pid_t> Descendants() {
  std::set<pid_t> out;
  std::vector<pid_t> todo{::getpid()};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    for (pid_t child : ChildPids(p)) {
      if (out.insert(child).second) todo.push_back(child);
    }
  }
  return out;
}

// How the session processes reaped here ended: a runner's keeper reaps it
// (its parent, or its subreaper once its parent died), and keepers and
// orphans that came here are reaped here; the host asks why one died.
void ReapAndRecord() {  // async-signal-safe
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) exit_records::Record(pid, status);
}

// Blocks SIGCHLD while alive (the handler writes what the loop reads).
class ChildSignalsHeld {
 public:
  ChildSignalsHeld() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &set, &old_);
  }
  ~ChildSignalsHeld() { ::sigprocmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

void ReapExited() {
  ChildSignalsHeld held;
  ReapAndRecord();
}

// The wait status of `pid`, once it has exited and been reaped by its
// session's keeper (or here), waiting up to `patience` for a process that is
// dying; nullopt when none is recorded.
std::optional<int> ExitStatusOf(pid_t pid, std::chrono::milliseconds patience) {
  auto give_up = std::chrono::steady_clock::now() + patience;
  for (;;) {
    {
      ChildSignalsHeld held;
      ReapAndRecord();
    }
    if (std::optional<int> status = exit_records::Find(pid)) return status;
    // Still there (dying, or a zombie its keeper is about to reap), or just
    // reaped and being recorded: wait; long gone and never recorded: give up.
    const bool exists = ::kill(pid, 0) == 0 || errno == EPERM;
    if (std::chrono::steady_clock::now() >= give_up) return std::nullopt;
    if (!exists) {
      timespec nap{0, 2'000'000};
      ::nanosleep(&nap, nullptr);
      return exit_records::Find(pid);
    }
    timespec nap{0, 1'000'000};
    ::nanosleep(&nap, nullptr);
  }
}

// SIGCHLD: reaps at once, and records how each child ended (ExitStatusOf).
// The worker's children are the sessions' keepers, and it is a child
// subreaper, so what a keeper leaves when it dies comes here too; reaped
// only between frames (the host sends one per new session, the loop wakes
// once a second), exited processes would pile up as zombies.
// waitpid is async-signal-safe; errno is kept.
void ReapOnSigchld(int) {
  const int saved = errno;
  ReapAndRecord();
  errno = saved;
}

void ReapChildrenAsTheyExit() {
  struct sigaction action {};
  action.sa_handler = ReapOnSigchld;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  ::sigaction(SIGCHLD, &action, nullptr);
}

// Kills every process this worker forked (and theirs: orphans are reparented
// here because the worker is a child subreaper) and reaps them.
void KillEverySession() {
  for (int round = 0; round < 100; ++round) {
    std::set<pid_t> pids = Descendants();
    if (pids.empty()) break;
    for (pid_t p : pids) ::kill(p, SIGKILL);
    // Reap the killed ones that are this process's children (the others
    // answer ECHILD at once). Never wait for just any child: one forked by a
    // session process as it was being killed (a checkpoint writer stuck in a
    // __reduce__, say) is reparented here unkilled, and waiting for it would
    // hang this teardown until the host gives up and the writer outlives us.
    // The next round sees it, and the killed grandchildren, here by now.
    for (pid_t p : pids) {
      while (::waitpid(p, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }
  ReapExited();
}

// A session forked ahead: its keeper and its first process, which waits for
// the session's socket (AwaitSessionSocket). The worker keeps one ready, so
// a new session's path holds no fork (without it, two: the keeper, then the
// first process). Forked once the worker has had no frame for
// kSpareAfterIdle, so its forks never compete for the CPU with a session the
// worker has just opened, or with the worker's own start.
constexpr std::chrono::milliseconds kSpareAfterIdle{2};
// SharePagesAhead (shared_heap.h) blocks the worker for an import (~40 ms
// here): it waits until the worker has had no frame for this long, so a
// burst of new sessions at the start is not held up by it. The spare forked
// before it is then replaced by one that shares what it made.
constexpr std::chrono::milliseconds kShareAfterIdle{100};
// PreloadCommonModules (~10-15 ms, once) waits for only this long: an agent
// loop opening a session every few tens of ms leaves the worker idle that
// long between its OPENs, never 100 ms.
constexpr std::chrono::milliseconds kPreloadAfterIdle{5};

struct SpareSession {
  pid_t keeper = -1;
  UniqueFd report;   // the first process's pid comes here (AwaitReportedPid)
  UniqueFd command;  // the session's socket goes here
};

// Forks a keeper whose first process is forked at once and waits for its
// session's socket. Null when a fork fails (OPEN then forks its own). A
// pointer, not an optional: GCC 12 warns of the optional's UniqueFds as
// maybe uninitialized (a false positive) wherever it is reset.
std::unique_ptr<SpareSession> ForkSpareSession(int host, const WorkerSettings& settings,
                                             int host_pidfd) {
  int command[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, command) != 0) return nullptr;
  UniqueFd mine(command[0]), its(command[1]);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return nullptr;
  UniqueFd report_read(report[0]), report_write(report[1]);
  int pid = ForkKeeper();  // the keeper runs no Python (engine_fork.h)
  if (pid < 0) return nullptr;
  if (pid == 0) {
    ::close(host);
    mine.Reset();
    report_read.Reset();
    ::signal(SIGCHLD, SIG_DFL);
    UniqueFd keeper_link = BecomeKeeper(report_write.Release(), WorkerSessionWalls());  // the keeper stays there
    UniqueFd socket = AwaitSessionSocket(std::move(its));
    ServeSession(std::move(socket), settings, /*expect_load=*/true, host_pidfd,
                 std::move(keeper_link));
  }
  return std::make_unique<SpareSession>(SpareSession{pid, std::move(report_read), std::move(mine)});
}

// kOpen: the spare session's first process takes the session when there is
// one; else a keeper is forked, which forks the session's first process
// (session_keeper.h). The host gets that process's channel and pid.
Status OpenSession(int host, const WorkerSettings& settings, int host_pidfd,
                   std::unique_ptr<SpareSession>& spare) {
  auto pair = protocol::SocketPair();
  if (!pair.ok()) return pair.status();
  pid_t keeper = -1;
  pid_t session_pid = -1;
  if (spare) {
    keeper = spare->keeper;
    int report = spare->report.get();
    Py_BEGIN_ALLOW_THREADS
    session_pid = AwaitReportedPid(report, 10'000);  // written long ago, as a rule
    Py_END_ALLOW_THREADS
    if (session_pid > 0 && !HandSessionSocket(spare->command.get(), pair->second.get())) {
      session_pid = -1;
    }
    spare.reset();  // taken, or gone: its first process exits when the command closes
  }
  if (session_pid < 0) {
    if (keeper > 0) ::kill(keeper, SIGKILL);
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) return IoError(std::string("pipe: ") + std::strerror(errno));
    UniqueFd report_read(report[0]), report_write(report[1]);
    keeper = ForkKeeper();
    if (keeper < 0) return IoError(std::string("fork: ") + std::strerror(errno));
    if (keeper == 0) {
      ::close(host);
      pair->first.Reset();
      report_read.Reset();
      ::signal(SIGCHLD, SIG_DFL);
      UniqueFd keeper_link = BecomeKeeper(report_write.Release(), WorkerSessionWalls());
      ServeSession(std::move(pair->second), settings, /*expect_load=*/true, host_pidfd,
                   std::move(keeper_link));
    }
    report_write.Reset();
    int fd = report_read.get();
    Py_BEGIN_ALLOW_THREADS
    session_pid = AwaitReportedPid(fd, 10'000);
    Py_END_ALLOW_THREADS
  }
  pair->second.Reset();
  PayloadWriter w;
  if (session_pid < 0) {
    ::kill(keeper, SIGKILL);  // a keeper that could not start its session
    w.U32(0);
    return protocol::WriteFrame(host, Tag::kOpened, w.data());  // the host reads a malformed OPENED
  }
  w.U32(static_cast<std::uint32_t>(session_pid));
  Status sent = protocol::WriteFrame(host, Tag::kOpened, w.data(), pair->first.get());
  // The host's end is the host's now: a spare forked later holds no copy
  // (the session would never see the host close it).
  pair->first.Reset();
  return sent;
}

// The inherited fd that the environment variable `name` names, or -1 when
// unset or malformed.
int FdFromEnvironment(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return -1;
  char* end;
  long fd = std::strtol(text, &end, 10);
  if (*end != '\0' || fd < 0 || fd > 1 << 20) return -1;
  return static_cast<int>(fd);
}

// Until its handshake the worker's stderr is a capture the host reads if the
// worker dies first. Once it is about to answer, it writes to the host's own
// stderr instead (an fd the host passed; see worker_process.h), so nothing
// it writes later can pile up anywhere. Session processes are forked after
// this and inherit it.
void UseHostStderr() {
  int fd = FdFromEnvironment(kWorkerStderrFdVariable);
  ::unsetenv(kWorkerStderrFdVariable);
  if (fd <= 2) return;
  // What is buffered belongs to the start-up, and so to the capture.
  for (const char* name : {"stdout", "stderr"}) {
    PyObject* stream = PySys_GetObject(name);  // borrowed
    if (stream == nullptr || stream == Py_None) continue;
    PyObject* flushed = PyObject_CallMethod(stream, "flush", nullptr);
    if (flushed == nullptr) PyErr_Clear();
    Py_XDECREF(flushed);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(fd, 2);
  ::dup2(2, 1);  // as at the start: stray writes to fd 1 go to stderr
  ::close(fd);
}

StatusOr<Frame> ReadReleasingGil(int fd, protocol::Deadline deadline) {
  StatusOr<Frame> frame = Status(ErrorCode::kInternal, "unread");
  Py_BEGIN_ALLOW_THREADS
  frame = protocol::ReadFrame(fd, deadline);
  Py_END_ALLOW_THREADS
  return frame;
}

}  // namespace

int WorkerFdFromEnvironment() { return FdFromEnvironment(kWorkerFdVariable); }

int RunWorker(int socket_fd) {
  // Before the session's objects exist: their arenas then sit in huge pages,
  // which makes the rollback fork after every cell copy 512 times fewer
  // page-table entries (embedded/huge_page_arenas.h). DOLSOT_HUGE_PAGES=0
  // keeps CPython's own arenas.
  if (const char* huge = std::getenv("DOLSOT_HUGE_PAGES"); huge == nullptr || std::string(huge) != "0") {
    InstallHugePageArenas();
  }
  UniqueFd host(socket_fd);
  ::fcntl(socket_fd, F_SETFD, FD_CLOEXEC);
  // Stray writes to fd 1 (threads, C code) must not reach a CLI's stdout.
  ::fflush(stdout);
  ::dup2(2, 1);

  auto hello = ReadReleasingGil(host.get(), std::nullopt);
  if (!hello.ok() || hello->tag != Tag::kHello) return 2;
  auto settings = DecodeHello(hello->payload);
  if (!settings.ok()) {
    // The same shape as every HELLO_ERROR, so a version mismatch reads as one.
    PayloadWriter w;
    w.U32(static_cast<std::uint32_t>(settings.status().code())).Str(settings.status().message());
    (void)protocol::WriteFrame(host.get(), Tag::kHelloError, w.data());
    return 2;
  }
  // The host (this worker's parent), which snapshots watch: see
  // session_process.cc. Close-on-exec; a kernel without pidfds gives -1.
  // Opened before a sandbox's PID namespace hides the host.
  const pid_t host_pid = ::getppid();
  UniqueFd host_pidfd(host_pid > 1 ? static_cast<int>(::syscall(SYS_pidfd_open, host_pid, 0)) : -1);
  if (::getppid() != host_pid) host_pidfd.Reset();  // the host is gone already
  Status ready = SetSysPath(*settings);
  SandboxReport sandbox;
  if (ready.ok() && settings->sandbox) {
    // Walls first: the toolboxes import inside them (from the same paths).
    auto entered = EnterWorkerSandbox(*settings);
    if (entered.ok()) sandbox = std::move(entered).value();
    ready = entered.status();
  }
  if (ready.ok()) ready = InstallCellIo();
  // Before any session's code: the builtins a read-only cell may call are
  // the interpreter's own as it starts (embedded/read_only_cell.h); the
  // session processes inherit them. DOLSOT_READ_ONLY_CELLS=0 leaves the
  // fast path off (every cell then forks its snapshot and checkpoints).
  if (const char* read_only = std::getenv("DOLSOT_READ_ONLY_CELLS");
      ready.ok() && (read_only == nullptr || std::string(read_only) != "0")) {
    (void)ReadOnlyCell::Prepare();  // a failure only means no fast path
  }
  // Before the toolboxes: one of them may import matplotlib.
  if (ready.ok()) ready = InstallFigureBackend(/*force=*/true);
  if (ready.ok()) ready = ImportToolboxes(host.get(), *settings);
  if (ready.ok() && settings->sandbox) ready = LockWorkerSandbox(*settings, &sandbox);
  if (!ready.ok()) {
    PayloadWriter w;
    w.U32(static_cast<std::uint32_t>(ready.code())).Str(ready.message());
    (void)protocol::WriteFrame(host.get(), Tag::kHelloError, w.data());
    return 1;
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  exit_records::Share();     // before the first keeper: they record here
  ReapChildrenAsTheyExit();  // a session process forked later resets SIGCHLD
  ReapExited();              // what exited before the handler was there
  UseHostStderr();
  PayloadWriter w;
  w.U32(static_cast<std::uint32_t>(::getpid()));
  w.Str(sandbox.Encode());  // empty without a sandbox
  if (!protocol::WriteFrame(host.get(), Tag::kHelloOk, w.data()).ok()) return 0;
  // The next session is forked ahead once the worker has been idle a moment
  // (kSpareAfterIdle), not while a session it has just opened starts.
  std::unique_ptr<SpareSession> spare;
  bool preloaded = false;     // PreloadCommonModules, once idle kPreloadAfterIdle
  bool shared_ahead = false;  // SharePagesAhead, once idle kShareAfterIdle

  for (;;) {
    Status readable;
    Py_BEGIN_ALLOW_THREADS
    readable = protocol::WaitReadable(
        host.get(), protocol::Clock::now() + (!spare          ? kSpareAfterIdle
                                              : !preloaded    ? kPreloadAfterIdle
                                              : !shared_ahead ? kShareAfterIdle
                                                              : std::chrono::milliseconds(1000)));
    Py_END_ALLOW_THREADS
    ReapExited();
    if (readable.code() == ErrorCode::kTimeout) {
      if (!spare) {
        spare = ForkSpareSession(host.get(), *settings, host_pidfd.get());
      } else if (!preloaded) {
        PreloadCommonModules();
        preloaded = true;
        spare.reset();  // forked again at the next idle moment, sharing them
      } else if (!shared_ahead) {
        SharePagesAhead();
        shared_ahead = true;
        spare.reset();  // forked again at the next idle moment, sharing them
      }
      continue;
    }
    auto frame = ReadReleasingGil(host.get(), std::nullopt);
    if (!frame.ok() || frame->tag == Tag::kShutdown) break;
    if (frame->tag == Tag::kOpen) {
      if (!OpenSession(host.get(), *settings, host_pidfd.get(), spare).ok()) break;
    } else if (frame->tag == Tag::kExitStatus) {
      protocol::PayloadReader r(frame->payload);
      auto pid = static_cast<pid_t>(r.U32());
      if (!r.Finish("EXIT_STATUS").ok() || pid <= 1) break;
      std::optional<int> status;
      Py_BEGIN_ALLOW_THREADS
      status = ExitStatusOf(pid, std::chrono::seconds(2));
      Py_END_ALLOW_THREADS
      PayloadWriter w;
      w.U8(status ? 1 : 0).I32(status.value_or(0));
      if (!protocol::WriteFrame(host.get(), Tag::kExitStatusReply, w.data()).ok()) break;
    } else {
      break;  // a protocol violation: stop rather than guess
    }
  }
  spare.reset();  // its end closed: a spare that waits exits by itself
  KillEverySession();
  return 0;
}

}  // namespace dolsot
