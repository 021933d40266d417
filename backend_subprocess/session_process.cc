// Session process: the runner/snapshot loop, cell execution through RunCell,
// rollback copies, checkpoint writers and branches.
#include <Python.h>

#include "backend_subprocess/session_process.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <string>
#include <vector>

#include "backend_subprocess/checkpoint.h"
#include "backend_subprocess/checkpoint_journal.h"
#include "backend_subprocess/engine_fork.h"
#include "backend_subprocess/fork_guard.h"
#include "backend_subprocess/host_variables.h"
#include "backend_subprocess/helper_reaping.h"
#include "backend_subprocess/hot_pages.h"
#include "backend_subprocess/journal_replay.h"
#include "backend_subprocess/post_cell_pacing.h"
#include "backend_subprocess/pristine_state.h"
#include "backend_subprocess/protocol.h"
#include "backend_subprocess/run_frame.h"
#include "backend_subprocess/session_keeper.h"
#include "backend_subprocess/session_threads.h"
#include "backend_subprocess/socket_sink.h"
#include "backend_subprocess/tool_channel.h"
#include "backend_subprocess/unsaveable_names.h"
#include "embedded/cell_runner.h"
#include "embedded/cell_sources.h"
#include "embedded/cell_tools.h"
#include "embedded/pure_functions.h"
#include "embedded/py_ref.h"
#include "embedded/read_only_cell.h"

namespace dolsot {
namespace {

using protocol::Frame;
using protocol::PayloadReader;
using protocol::PayloadWriter;
using protocol::Tag;
using fork_guard::GuardedFd;

[[noreturn]] void Exit(int code) { ::_exit(code); }

// How long a runner whose cells ran waits for the host's next request
// before it refreshes its snapshot (SessionProcess::RefreshWhenIdle): longer
// than cells come apart in a loop, shorter than an agent's model thinks.
constexpr std::chrono::milliseconds kRefreshAfterIdle{1000};

// Waits (GIL released) until the process `pidfd` pins has exited.
void AwaitExit(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  int r;
  do {
    Py_BEGIN_ALLOW_THREADS
    r = ::poll(&p, 1, -1);
    Py_END_ALLOW_THREADS
  } while (r < 0 && errno == EINTR);
}

// Whether the peer of `socket` closed it, with nothing left to read.
bool HungUp(int socket) {
  char byte;
  ssize_t n = ::recv(socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0;
}

// `fd` guarded (see fork_guard.h), for a process that cannot serve without
// it: when it cannot be guarded, the process exits (the host sees it die)
// rather than hand the descriptor to the children a cell forks.
GuardedFd GuardedOrExit(UniqueFd fd) {
  auto guarded = GuardedFd::Create(std::move(fd));
  if (!guarded.ok()) Exit(3);
  return std::move(guarded).value();
}

class SessionProcess {
 public:
  SessionProcess(UniqueFd socket, const WorkerSettings& settings, int host_pidfd,
                 UniqueFd keeper_link)
      : socket_(GuardedOrExit(std::move(socket))),
        keeper_(GuardedOrExit(std::move(keeper_link))),
        settings_(settings),
        aliases_(settings.Aliases()),
        host_pidfd_(host_pidfd) {
    globals_ = PyModule_GetDict(PyImport_AddModule("__main__"));  // borrowed
    builtins_ = PyModule_GetDict(PyImport_AddModule("builtins"));  // borrowed
  }

  [[noreturn]] void Serve(bool expect_load) {
    const bool fresh = !expect_load || Load();
    role_ = Role::kRunner;
    // A fresh runner shares every page with its snapshot: the faults a cell
    // takes are taken ahead, before the host's first RUN (a new session is
    // often opened ahead of it: spare_session.h).
    if (settings_.snapshots && !Announce()) {
      WarmUp();
      // A new session as its first cell finds it: as its snapshot holds it
      // (the warm-up leaves nothing a cell could see).
      if (fresh) pristine_.Note(globals_, builtins_, cells_run_);
    }
    for (;;) {
      if (role_ == Role::kSnapshot) {
        WaitAsSnapshot();
      } else {
        RunNext();
      }
    }
  }

 private:
  // The runner holds the live state and runs every cell, so the threads a
  // cell starts are there for the next one. With rollback on, its snapshot
  // (a child it forked after its last cell, idle) holds the state as it was
  // before the running cell; when that cell is killed, the snapshot is
  // promoted and becomes the runner.
  enum class Role { kRunner, kSnapshot };

  // `wait()`, the GIL released around it, unless CPython's side of the
  // fork that made this snapshot is still to come (engine_fork.h's
  // ForkDeferringPython): then it is the only thread, and keeps the GIL.
  template <typename Wait>
  auto Unlocked(Wait wait) {
    if (python_deferred_) return wait();
    PyThreadState* saved = PyEval_SaveThread();
    auto out = wait();
    PyEval_RestoreThread(saved);
    return out;
  }
  StatusOr<Frame> Read() {
    if (fork_guard::InCellChild()) Exit(0);  // see RunCellFrame
    return Unlocked([this] { return protocol::ReadFrame(socket_.get()); });
  }
  void Send(Tag tag, std::string_view payload, int pass_fd = -1, int pass_fd2 = -1) {
    if (fork_guard::InCellChild()) Exit(0);  // see RunCellFrame
    Status s;
    Py_BEGIN_ALLOW_THREADS
    s = protocol::WriteFrame(socket_.get(), tag, payload, pass_fd, pass_fd2);
    Py_END_ALLOW_THREADS
    if (!s.ok()) Exit(0);  // the host is gone
  }
  // A frame from the host, or exit when it is gone or speaks nonsense.
  Frame ReadOrExit() {
    for (;;) {
      AwaitRequest();
      auto frame = Read();
      if (!frame.ok()) Exit(0);
      // A tool's reply the host sent before it read the Result of the cell
      // that asked: that cell is over, so the reply has no taker.
      if (frame->tag == Tag::kToolReply) continue;
      return std::move(frame).value();
    }
  }

  // Restores what LOAD carries; true when it carried nothing (a new session).
  bool Load() {
    Frame frame = ReadOrExit();
    if (frame.tag != Tag::kLoad) Exit(2);
    std::vector<std::string> restored, failed;
    std::string error;
    if (!frame.payload.empty()) {
      // The base blob, then what binding cells changed after it (its journal).
      const SplitCheckpoint split = SplitJournal(frame.payload);
      auto outcome = RestoreNamespace(globals_, split.base);
      if (outcome.ok()) {
        cells_run_ = outcome->cells_run;
        restored = std::move(outcome->restored);
        failed = std::move(outcome->failed);
        error = ApplyJournal(globals_, split, restored, failed, cells_run_);
        unsaveable_.Trust(globals_, restored);
        // Its functions whose bodies a binding proof may call again.
        ReadOnlyCell::RegisterRestored(globals_);
      } else {
        error = outcome.status().message();
      }
    }
    PayloadWriter w;
    w.Strs(restored).Strs(failed).Str(error);
    Send(Tag::kReady, w.data());
    return frame.payload.empty();
  }

  // Reaps the helper children (serializers, retired runners) that have exited.
  void ReapFinished() {
    for (auto it = helpers_.begin(); it != helpers_.end();) {
      if (::waitpid(*it, nullptr, WNOHANG) != 0) {
        it = helpers_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Forks a branch: a child that serves a new session on a fresh socket to
  // the host; this process sends the host's end with BRANCHED {pid}.
  // Returns true in the child.
  bool ForkBranch(pid_t* child_pid) {
    auto pair = protocol::SocketPair();
    if (!pair.ok()) Exit(3);
    int pid = ForkProcess();
    if (pid < 0) Exit(3);
    if (pid == 0) {
      tools_.AfterFork();
      socket_ = GuardedOrExit(std::move(pair->second));
      pair->first.Reset();
      DropPreparedChannels();  // no other child may keep a snapshot's socket open
      helpers_.clear();
      pristine_.Forget();  // its snapshot is to come, of a state cells made
      snapshot_pid_ = -1;  // the parent's, not ours
      pending_channel_.Reset();  // the parent writes it
      deferred_checkpoint_.Reset();
      waiting_writer_pidfd_.Reset();  // the parent's to supersede, not ours
      return true;
    }
    pair->second.Reset();
    PayloadWriter w;
    w.U32(static_cast<std::uint32_t>(pid));
    Send(Tag::kBranched, w.data(), pair->first.get());
    *child_pid = pid;
    return false;
  }

  // Forks this process's snapshot, which serves on `socket` (its host end
  // went to the host). Returns true in the child, now the snapshot. The
  // previous snapshot, if any, is killed once the new one exists: it holds
  // a state the host no longer wants.
  bool ForkSnapshot(UniqueFd socket) {
    pid_t previous = snapshot_pid_;
    snapshot_pid_ = -1;
    // Any snapshot forked from here on holds what cells made, unless its
    // caller notes otherwise (a new session's first: Serve, a renewal).
    pristine_.Forget();
    if (socket) {
      pid_t runner = ::getpid();
      int pid = ForkDeferringPython();
      if (pid == 0) {
        python_deferred_ = true;  // until it is promoted (WaitAsSnapshot)
        tools_.AfterFork();
        socket_ = GuardedOrExit(std::move(socket));
        DropPreparedChannels();
        pending_channel_.Reset();  // the runner writes it
        deferred_checkpoint_.Reset();
        helpers_.clear();
        // Pins the runner (our parent) so a promotion can make sure it is
        // gone before this process runs cells in its place.
        runner_pidfd_.Reset(static_cast<int>(::syscall(SYS_pidfd_open, runner, 0)));
        if (::getppid() != runner) runner_pidfd_.Reset();  // already gone
        runner_pid_ = runner;
        role_ = Role::kSnapshot;
        return true;
      }
      if (pid > 0) snapshot_pid_ = pid;
      // On failure the socket closes here: the host cannot promote it.
    }
    if (previous > 0) {
      ::kill(previous, SIGKILL);  // our child, not reaped yet: the pid is still its
      helpers_.push_back(previous);
    }
    return false;
  }

  // A process that starts serving cells (restored, branched or promoted)
  // tells the host its pid in RUNNER and, rollback on, hands over the socket
  // of the snapshot it forks first. Returns true in that snapshot.
  bool Announce() {
    UniqueFd host_end;
    if (settings_.snapshots) {
      auto pair = protocol::SocketPair();
      if (pair.ok()) {
        if (ForkSnapshot(std::move(pair->second))) return true;
        if (snapshot_pid_ > 0) host_end = std::move(pair->first);
      }
    }
    PayloadWriter w;
    w.U32(static_cast<std::uint32_t>(::getpid()));
    Send(Tag::kRunner, w.data(), host_end ? host_end.get() : -1);
    return false;
  }

  // A snapshot waits, idle, until the host promotes it (the runner's cell
  // was killed or the runner died) or hangs up (a newer snapshot replaced
  // it, or the session closed). It also watches the host process itself:
  // when the host is gone (and the worker too, or the worker would have
  // killed every session), it kills its runner, so a runaway cell never
  // outlives the host; the runner needs no thread of its own for that.
  void WaitAsSnapshot() {
    if (host_pidfd_ >= 0) {
      pollfd p[2] = {{socket_.get(), POLLIN, 0}, {host_pidfd_, POLLIN, 0}};
      int r;
      do {
        r = Unlocked([&p] { return ::poll(p, 2, -1); });
      } while (r < 0 && errno == EINTR);
      if (r > 0 && p[1].revents == 0 && HungUp(p[0].fd)) {
        // The host closed this socket: it retired this snapshot or ended the
        // session, or it is exiting (its files close before it is gone).
        // Which one shows within moments; a live host's snapshot just exits.
        r = Unlocked([&p] { return ::poll(&p[1], 1, 250); });
      }
      if (r > 0 && p[1].revents != 0) {  // the host is gone
        KillRunner();
        Exit(0);
      }
    }
    Frame frame = ReadOrExit();
    // RENEW: the host ended the session this process holds the start of
    // (LiveSession::Recycle), killing its runner, and a new session runs
    // here: nothing to replay, and no cell of the old session can run again
    // (SIGKILLed), so its end is not waited for.
    const bool renew = frame.tag == Tag::kRenew;
    if (frame.tag != Tag::kPromote && !renew) Exit(2);
    if (renew && !frame.payload.empty()) Exit(2);
    if (python_deferred_) {  // it runs Python from here on
      FinishDeferredFork();
      python_deferred_ = false;
    }
    // What the runner's binding cells bound after this process forked (the
    // host kept it): replayed below, before this process runs a cell or
    // forks its own snapshot.
    std::optional<protocol::Bindings> bindings;
    if (!frame.payload.empty()) {
      PayloadReader r(frame.payload);
      auto read = protocol::ReadBindings(r);
      if (!read.ok() || !r.Finish("PROMOTE").ok()) Exit(2);
      bindings = std::move(read).value();
    }
    // The host killed the runner or saw it die; make sure, and wait until it
    // is gone: two processes must never run this session's cells.
    if (runner_pidfd_) {
      KillRunner();
      if (!renew) AwaitExit(runner_pidfd_.get());
      runner_pidfd_.Reset();
    }
    // What the dead runner's cells started in sessions of their own is
    // killed before this process runs a cell (session_keeper.h).
    Py_BEGIN_ALLOW_THREADS
    AwaitSweep(keeper_.get(), 10'000);
    Py_END_ALLOW_THREADS
    role_ = Role::kRunner;
    // Forked during post-cell work, under SCHED_BATCH: a rollback's runner
    // leaves it at once; a renewed one (a session ahead of its first cell)
    // keeps it until it has warmed up, so the cells running meanwhile
    // preempt it.
    background_.Set(renew);
    if (bindings) {
      if (!ReadOnlyCell::ApplyBindings(globals_, bindings->names, bindings->values)) Exit(2);
      unsaveable_.Trust(globals_, bindings->names);  // plain values
      cells_run_ = std::max(cells_run_, bindings->cells_run);
    }
    if (Announce()) return;  // the new snapshot
    WarmUp();
    if (renew) pristine_.Note(globals_, builtins_, cells_run_);
    background_.Set(false);
  }

  // RENEW_IN_PLACE (LiveSession::Recycle): the host ended the session this
  // runner serves, whose snapshot still holds a new session and whose every
  // cell since was proven read-only or binding (PristineState holds what
  // that snapshot holds). Its namespace, builtins and cell sources go back
  // to those very objects; what the cell machinery kept of the ended session
  // goes (proven functions, the host's variables, the checkpoint base and
  // verdicts, a checkpoint channel still waiting for its writer), and the
  // runner serves a new session with the same snapshot. It sends nothing:
  // the host's next RUN is already on its way. No fork, no warm-up: the
  // pages are this process's already. When it cannot (a module imported
  // since, another thread alive, the tools' transport made), it exits
  // before reading anything more, and the host renews the snapshot instead.
  void RenewInPlace() {
    if (transport_ != nullptr || OtherPythonThreads() || !pristine_.Restore()) Exit(0);
    PureFunctions::Clear();
    variables_.Forget();
    unsaveable_ = UnsaveableNames();
    delta_base_.reset();
    cells_run_ = pristine_.cells_run();
    refresh_due_ = false;
    pending_channel_.Reset();  // the ended session's checkpoint: the host gave it up
  }

  // In a snapshot: SIGKILLs its runner (its parent, pinned by a pidfd) and,
  // while the runner is still its parent and so leads its group, that group.
  void KillRunner() {
    if (!runner_pidfd_) return;
    if (::getppid() == runner_pid_) ::kill(-runner_pid_, SIGKILL);
    ::syscall(SYS_pidfd_send_signal, runner_pidfd_.get(), SIGKILL, nullptr, 0);
  }

  // After a Result, off the host's critical path (rollback on): once the host
  // has read it, note the pages the cell wrote (while the last snapshot
  // still shares the rest), start the checkpoint writer, fork the snapshot
  // of this new state (retiring the previous one), then take the faults the
  // next cell would take. Returns true in the new snapshot.
  bool AfterCell(UniqueFd writer_channel) {
    WaitHostRead(socket_.get());
    hot_.Observe();
    if (writer_channel) {
      PreloadSerializers(globals_);  // the writer inherits dill (see checkpoint.h)
      ForkCheckpointWriter(std::move(writer_channel));
    }
    ReapFinished();
    if (ForkSnapshot(snapshot_socket_.Take())) return true;
    WarmUp();
    background_.Set(false);  // a cell must preempt like any other process
    return false;
  }

  // Just after a fork the runner shares its pages with its snapshot: the
  // first write to each costs a copy-on-write fault. Running a throwaway cell
  // now, while the host is not waiting (no request pending), takes the faults
  // a typical cell's interpreter machinery would take off the critical path.
  void WarmUp() {
    auto request_pending = [this] { return protocol::Readable(socket_.get()); };
    // The pages recent cells wrote (see hot_pages.h), then a throwaway cell.
    hot_.Populate(request_pending);
    if (request_pending()) return;
    // "0" in the session's own namespace binds nothing and prints nothing,
    // but touches what every cell touches (the namespace, the cell machinery,
    // the value's repr).
    CellRequest request;
    request.code = "0";
    request.filename = "<dolsot warm-up>";
    request.hidden_names = aliases_;
    (void)RunCell(globals_, request);
    ForgetCellSource(request.filename);  // no trace a cell could see
    // A session's first cell is proven (read_only_cell.h) before it runs:
    // the proof's own machinery (its parse, the glue's code and tables) is
    // shared with the worker until then, and its faults would land on that
    // cell (~0.3 ms). Proving a throwaway cell now takes them here; every
    // session's cells touch those pages anyway, so this costs no memory a
    // cell would not. Nothing is bound or registered.
    if (cells_run_ == 0 && ProofsApply() && !request_pending()) {
      std::vector<std::string> names;
      Ref definitions;
      (void)ReadOnlyCell::Classify("_ = [len(str(i)) for i in range(2)]\nprint(_)", globals_,
                                   /*binding=*/true, &names, &definitions);
    }
  }

  // Whether a cell may be proven read-only or binding: only where something
  // holds the state it leaves (a snapshot, or checkpoints).
  bool ProofsApply() const {
    return settings_.snapshots || settings_.checkpoint != CheckpointMode::kOff;
  }

  // In the branch child (now serving the new session), also forks its
  // first snapshot.
  void Branch() {
    pid_t pid;
    if (!ForkBranch(&pid)) {
      helpers_.push_back(pid);
      return;
    }
    role_ = Role::kRunner;
    if (settings_.snapshots) (void)Announce();
  }

  // A checkpoint of this state: a delta against the base the host last
  // named, when `may_delta` and that pays (SerializeNamespacePieces).
  NamespacePieces Serialize(bool may_delta) {
    return SerializeNamespacePieces(globals_, aliases_, cells_run_,
                                    may_delta && delta_base_ ? &*delta_base_ : nullptr);
  }

  void CheckpointNow(bool may_delta) {
    if (!SendCheckpointData(socket_.get(), Serialize(may_delta)).ok()) Exit(0);  // the host is gone
  }

  // CHECKPOINT_DATA on `fd`: the blob, sent from the pickles where they are
  // (no copy of it is built), then the names, whether it is a delta (and
  // against what, keeping which names), then the blob's size.
  Status SendCheckpointData(int fd, const NamespacePieces& ns) {
    PayloadWriter w;
    w.Strs(ns.saved).Strs(ns.dropped).U8(ns.delta ? 1 : 0);
    if (ns.delta) w.U64(ns.delta_of.size).U32(ns.delta_of.fingerprint).Strs(ns.kept);
    w.U64(ns.size);
    std::vector<std::string_view> parts = ns.pieces;
    parts.push_back(w.data());
    if (fork_guard::InCellChild()) Exit(0);  // see RunCellFrame
    Status s;
    Py_BEGIN_ALLOW_THREADS
    s = protocol::WriteFrameParts(fd, Tag::kCheckpointData, parts);
    Py_END_ALLOW_THREADS
    return s;
  }

  // Async checkpoint: a forked copy serializes this state and sends it on
  // `channel` (whose other end went to the host with the Result) while the
  // next cell runs.
  //
  // At most one writer runs at a time (coalescing): while one runs, the
  // newest channel waits in pending_channel_ (closing an older pending one:
  // the host skips a channel that closes without data, and the newer state
  // supersedes it) and gets its writer, from this process's state, when the
  // running one exits (see AwaitRequest).
  //
  // Rollback off, no other process holds this state: if the runner dies
  // (a crash in the next cell) a channel pending here would die with it. So
  // the newest checkpoint's writer is forked at once and waits (idle) for the
  // running one to exit before it serializes; a writer still waiting when a
  // newer one comes is killed (its channel closes without data, and the host
  // skips it). At most one serializes at a time all the same.
  void ForkCheckpointWriter(UniqueFd channel) {
    if (!WriterRunning() && waiting_writer_pidfd_) {
      writer_pidfd_ = std::move(waiting_writer_pidfd_);  // it serializes by now
    }
    const bool busy = WriterRunning();
    if (busy && settings_.snapshots) {
      pending_channel_ = std::move(channel);
      return;
    }
    if (busy && waiting_writer_pidfd_) {
      ::syscall(SYS_pidfd_send_signal, waiting_writer_pidfd_.get(), SIGKILL, nullptr, 0);
      waiting_writer_pidfd_.Reset();
    }
    int pid = ForkProcess();
    if (pid == 0) {
      tools_.AfterFork();
      socket_ = GuardedOrExit(std::move(channel));
      pending_channel_.Reset();
      deferred_checkpoint_.Reset();
      waiting_writer_pidfd_.Reset();
      // The next snapshot's socket: if the writer kept it open, the host
      // would not see that snapshot die.
      DropPreparedChannels();
      (void)::setpriority(PRIO_PROCESS, 0, 10);  // yield to the cells
      if (busy) AwaitExit(writer_pidfd_.get());  // the writer before us (pidfd inherited)
      writer_pidfd_.Reset();
      CheckpointNow(/*may_delta=*/true);
      Exit(0);
    }
    if (pid > 0) {
      helpers_.push_back(pid);
      UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
      (busy ? waiting_writer_pidfd_ : writer_pidfd_) = std::move(pidfd);
    }
    // On failure the channel closes here: the host sees no checkpoint.
  }

  // Whether the last writer this lineage started is still running (its pidfd
  // is inherited through forks, so a promoted snapshot knows the runner's).
  bool WriterRunning() const {
    if (!writer_pidfd_) return false;
    pollfd p{writer_pidfd_.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }

  // Before reading a request: while a checkpoint channel is pending, also
  // wait for the running writer to exit, then start the pending one.
  void AwaitRequest() {
    while (pending_channel_) {
      pollfd p[2] = {{socket_.get(), POLLIN, 0}, {writer_pidfd_.get(), POLLIN, 0}};
      int r;
      Py_BEGIN_ALLOW_THREADS
      r = ::poll(p, 2, -1);
      Py_END_ALLOW_THREADS
      if (r < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (p[1].revents != 0) {
        writer_pidfd_.Reset();
        ForkCheckpointWriter(std::move(pending_channel_));
      }
      if (p[0].revents != 0) return;
    }
    // Idle: helpers that exit meanwhile are reaped, not left as zombies.
    if (!helpers_.empty()) {
      Py_BEGIN_ALLOW_THREADS
      AwaitReadableReaping(socket_.get(), &helpers_);
      Py_END_ALLOW_THREADS
    }
  }

  // Rollback on, once cells ran and the host then sent nothing for
  // kRefreshAfterIdle: forks a snapshot of this state, hands its socket to
  // the host (SNAPSHOT_REFRESHED, which the host reads before anything this
  // process sends later) and retires the old snapshot. The old one held the
  // state as it was at the last fork, and this process then copied the
  // pages the cells wrote and those it took ahead for the next cell
  // (HotPages): two copies of them for as long as the session idles. The
  // new one shares every page with this process, and nothing is taken
  // ahead after it: an idle session costs one copy of its state, and its
  // next cell takes the copy-on-write faults the warm-up would have taken.
  // The host lets go of what binding cells bound since the old snapshot
  // (the new one holds it). Not while the snapshot holds a new session
  // (PristineState): the session stays one that can be made new in place
  // (RenewInPlace) for as long as only proven cells run, for ~0.3 MB more
  // while it idles. Returns true in the new snapshot.
  bool RefreshWhenIdle() {
    if (!refresh_due_ || !settings_.snapshots || pending_channel_ || pristine_.held()) return false;
    refresh_due_ = false;
    Status idle;
    Py_BEGIN_ALLOW_THREADS
    idle = protocol::WaitReadable(socket_.get(), std::chrono::steady_clock::now() + kRefreshAfterIdle);
    Py_END_ALLOW_THREADS
    if (idle.code() != ErrorCode::kTimeout) return false;  // a request, or the host is gone
    UniqueFd host_end = snapshot_host_end_.Take();
    UniqueFd snapshot_end = snapshot_socket_.Take();
    if (!host_end || !snapshot_end) {
      auto pair = protocol::SocketPair();
      if (!pair.ok()) return false;
      host_end = std::move(pair->first);
      snapshot_end = std::move(pair->second);
    }
    const pid_t previous = snapshot_pid_;
    snapshot_pid_ = -1;  // retired below, once the host has the new one
    if (ForkSnapshot(std::move(snapshot_end))) return true;
    if (snapshot_pid_ <= 0) {  // no fork: the old snapshot stays
      snapshot_pid_ = previous;
      return false;
    }
    Send(Tag::kSnapshotRefreshed, {}, host_end.get());
    if (previous > 0) {
      ::kill(previous, SIGKILL);  // our child, not reaped yet: the pid is still its
      helpers_.push_back(previous);
    }
    return false;
  }

  // The sockets that go out with the next Result, made while no cell runs
  // (socketpair() costs ~30 µs here, cold): the async checkpoint's channel
  // and, rollback on, the pair of the snapshot this runner forks after the
  // cell (the host's end goes with the Result). Guarded: a cell's forked
  // children do not keep them.
  void PrepareReplyChannels() {
    auto make = [](GuardedFd& a, GuardedFd& b) {
      if (a && b) return;
      auto pair = protocol::SocketPair();
      if (!pair.ok()) return;  // made at reply time, or not at all
      auto first = GuardedFd::Create(std::move(pair->first));
      auto second = GuardedFd::Create(std::move(pair->second));
      if (!first.ok() || !second.ok()) return;  // closed: made at reply time instead
      a = std::move(first).value();
      b = std::move(second).value();
    };
    if (settings_.checkpoint == CheckpointMode::kAsync) {
      make(checkpoint_host_end_, checkpoint_writer_end_);
    }
    if (settings_.snapshots) make(snapshot_host_end_, snapshot_socket_);
  }
  // In a child that serves another purpose (writer, branch, runner).
  void DropPreparedChannels() {
    checkpoint_host_end_.Reset();
    checkpoint_writer_end_.Reset();
    snapshot_host_end_.Reset();
    snapshot_socket_.Reset();
  }

  void RunNext() {
    ReapFinished();
    PrepareReplyChannels();
    WriteDeferredCheckpoint();
    if (RefreshWhenIdle()) return;  // in the new snapshot: served as one from now on
    Frame frame = ReadOrExit();
    switch (frame.tag) {
      case Tag::kRun:
        RunCellFrame(frame);
        return;
      case Tag::kBranch:
        Branch();
        return;
      case Tag::kCheckpoint:
        CheckpointNow(/*may_delta=*/false);  // eviction, a branch, the timer: whole
        return;
      case Tag::kRenewInPlace:
        if (!frame.payload.empty()) Exit(2);
        RenewInPlace();
        return;
      case Tag::kRetire:
        Exit(0);
      default:
        Exit(2);
    }
  }

  void RunCellFrame(const Frame& frame) {
    StatusOr<RunFrame> run = ReadRunFrame(frame.payload);
    if (!run.ok()) Exit(2);
    if (run->delta_base) {
      delta_base_ = std::move(run->delta_base);
    } else if (run->no_delta_base) {
      delta_base_.reset();
    }
    const bool checkpoint_owed = run->checkpoint_owed;
    const bool snapshot_owed = run->snapshot_owed;
    const bool host_has_names = run->host_has_names;
    const std::vector<ReceivedVariable>& variables = run->variables;
    CellRequest request;
    request.max_output = run->max_output;
    request.max_repr = settings_.max_repr;
    request.code = run->code;
    // Numbered by the session, so the count is part of its state: it forks
    // with it, is rolled back with it (a cell that died leaves its number to
    // the next) and is kept in its checkpoints, so a restored function's
    // "<cell N>" never names a later cell.
    request.filename = CellFilename(++cells_run_);
    request.hidden_names = aliases_;
    SocketSink sink(socket_.get(), tools_.write_mutex(), run->live_output, run->live_images);
    request.sink = &sink;
    tools_.SendOutputFirst(&sink);
    PyObject* returned = nullptr;
    request.returned = &returned;
    tools_.BeginCell(socket_.get(), run->tool_pipes);
    Result result;
    bool variables_changed = false;
    std::vector<std::string> plain_variables;  // bound anew, to plain data
    Status bound = BindExtras(run->tools, variables, &variables_changed, &plain_variables);
    // A cell proven read-only (embedded/read_only_cell.h) that completes
    // leaves the state as the last snapshot and checkpoint hold it: neither
    // is made again. A binding cell that completes changes only the names it
    // bound: the snapshot stays, and the host keeps those values for it; it
    // saves them later (async: a journal frame or a checkpoint after the
    // delay) or before the Result returns (sync); so only with a snapshot
    // or sync checkpoints (rollback off: nothing else holds them). Variables
    // that bind names anew make a cell neither, unless they bind plain data
    // (HostVariables::Bind), which then counts among a binding cell's
    // bindings (one the session still holds from the last send changes
    // nothing: an agent's `context`, sent once); checked once the tools are
    // bound (a tool may shadow a builtin). A thread of the session's that
    // runs meanwhile could change anything: none may be alive.
    using Effect = ReadOnlyCell::Effect;
    Effect effect = Effect::kAny;
    std::vector<std::string> binding_names;
    Ref definitions;  // what its defs made, to register once it ran
    bool proven = false;  // whether its defs may be registered once it ran
    // A cell that takes the general path anyway (a new snapshot owed,
    // variables bound anew) is proven only for its defs' sake. A checkpoint
    // owed does not make it one: a read-only or binding cell writes it and
    // keeps its snapshot.
    const bool general_anyway = snapshot_owed || variables_changed;
    if (bound.ok() && ProofsApply() &&
        (!general_anyway || request.code.find("def") != std::string::npos)) {
      // With sync checkpoints the host saves its values (a journal frame)
      // before the Result returns, so rollback off is fine there too.
      const bool binding = settings_.snapshots || settings_.checkpoint == CheckpointMode::kSync;
      effect = ReadOnlyCell::Classify(request.code, globals_, binding, &binding_names, &definitions);
      if (effect != Effect::kAny && OtherPythonThreads()) effect = Effect::kAny;
      if (effect != Effect::kAny && !plain_variables.empty()) {
        if (!binding) {
          effect = Effect::kAny;  // a read-only cell's rollback point would lack them
        } else {
          for (std::string& name : plain_variables) {
            if (std::find(binding_names.begin(), binding_names.end(), name) == binding_names.end()) {
              binding_names.push_back(std::move(name));
            }
          }
          effect = Effect::kItsBindings;
        }
      }
      proven = effect != Effect::kAny;
      // The general path, but a def it makes is still what the proof saw.
      if (general_anyway) effect = Effect::kAny;
    }
    if (bound.ok()) {
      // Paused for a proven cell on the general path too: its defs are
      // registered after it, as what the proof saw.
      ReadOnlyCell::Scope no_finalizers(proven);
      // A proven read-only cell binds no name: the host's list stands.
      request.list_held = !(effect == Effect::kNothing && host_has_names);
      result = RunCell(globals_, request);
      // A tool's arguments or reply were not plain data: what ran is not
      // what the proof saw (its defs are not registered either).
      if (no_finalizers.unproven()) {
        effect = Effect::kAny;
        proven = false;
      }
      // Its proven functions, callable by the next cells' proofs.
      if (proven && definitions) {
        Ref filename(PyUnicode_FromStringAndSize(request.filename.data(),
                                                 static_cast<Py_ssize_t>(request.filename.size())));
        if (filename) {
          ReadOnlyCell::RegisterDefinitions(globals_, filename.get(), definitions.get());
        } else {
          PyErr_Clear();
        }
      }
    } else {
      result = Result::Failure(Outcome::kError, kExitFailure, bound.message(),
                               HeldNames(globals_, aliases_));
      result.error_type = "UnpicklingError";
    }
    // A process the cell forked (os.fork without exec) ran the rest of the
    // cell too. It is not the runner: it exits here, as a forked child of a
    // script ends with it, and never answers the host.
    if (fork_guard::InCellChild()) Exit(0);
    sink.Finish();  // a live cell's last batch, ahead of the Result
    tools_.SendOutputFirst(nullptr);
    tools_.EndCell();
    if (returned != nullptr) {
      StatusOr<std::string> pickled = PickleForHost(returned);
      Py_DECREF(returned);
      if (pickled.ok()) {
        result.returned.emplace();
        result.returned->pickle = std::move(pickled).value();
      } else {
        result.ok = false;
        result.exit_code = kExitFailure;
        result.error = "PicklingError: the cell's final answer cannot be sent to the host: " +
                       pickled.status().message();
        result.error_type = "PicklingError";
      }
    }

    // A proven cell started with no other thread alive and could start
    // none (it calls only pure builtins): none is alive now either.
    std::vector<std::string> threads;
    if (effect == Effect::kAny) threads = LiveThreadNames();
    // A read-only or binding cell that ran to its end, or raised, gets no
    // checkpoint and carries no descriptor: the snapshot from before it
    // stays the rollback point and nothing runs after it (no fork, no
    // HotPages). The proof holds for every statement that ran, so a cell
    // that raised halfway changed only what its names' values carry too (an
    // agent's NameError costs what its traceback costs). A binding cell's
    // values go to the host, or it counts as any other cell.
    const bool ran = result.ok || result.outcome() == Outcome::kError;
    const bool completed_alone = ran && returned == nullptr && threads.empty();
    const bool read_only = effect == Effect::kNothing && completed_alone;
    // Any other takes the general path: its Result lists them.
    const bool names_unchanged = read_only && !request.list_held;
    if (!request.list_held && !names_unchanged) result.held = HeldNames(globals_, aliases_);
    std::optional<protocol::Bindings> bindings;
    if (effect == Effect::kItsBindings && completed_alone) {
      bindings.emplace();
      bindings->cells_run = cells_run_;
      // A name still unbound (the cell raised before binding it) was
      // unbound before it too: a binding cell unbinds nothing.
      std::erase_if(binding_names, [this](const std::string& name) {
        return PyDict_GetItemString(globals_, name.c_str()) == nullptr;
      });
      ReadOnlyCell::InNamespaceOrder(globals_, &binding_names);
      bindings->names = std::move(binding_names);
      if (!ReadOnlyCell::MarshalBindings(globals_, bindings->names, &bindings->values)) {
        bindings.reset();
      }
    }
    const bool keeps_snapshot = read_only || bindings.has_value();
    // The host owes the store a checkpoint: every cell writes one, and one
    // that keeps its snapshot writes it without forking a new snapshot.
    const bool checkpointed = !keeps_snapshot || checkpoint_owed;
    PayloadWriter w;
    std::optional<NamespacePieces> checkpoint;  // sync: sent ahead of the Result
    std::vector<std::string> rebound;  // async: the names this cell bound anew
    if (keeps_snapshot && !(checkpoint_owed && settings_.checkpoint == CheckpointMode::kSync)) {
      // The verdicts a Result reports stay the session's own to give, from
      // names it already probed (an async checkpoint that would say them
      // may not have landed yet).
      // A read-only cell bound nothing: the last verdict stands.
      if (settings_.checkpoint == CheckpointMode::kAsync) {
        result.dropped = read_only ? unsaveable_.last() : unsaveable_.Update(globals_, aliases_, &rebound);
      }
    } else if (settings_.checkpoint == CheckpointMode::kSync) {
      checkpoint.emplace(Serialize(/*may_delta=*/true));
      result.dropped = checkpoint->dropped;
    } else if (settings_.checkpoint == CheckpointMode::kAsync) {
      // What this cell bound that its checkpoint, written later, cannot save.
      result.dropped = unsaveable_.Update(globals_, aliases_, &rebound);
    }
    protocol::WriteResult(w, result);
    w.U8(checkpoint ? 1 : 0);
    w.Strs(threads);
    w.Strs(rebound);
    // Async: the checkpoint's channel travels with the Result, so the host
    // starts saving at once.
    std::optional<std::pair<UniqueFd, UniqueFd>> channel;
    if (checkpointed && settings_.checkpoint == CheckpointMode::kAsync) {
      if (checkpoint_host_end_ && checkpoint_writer_end_) {
        channel.emplace(checkpoint_host_end_.Take(), checkpoint_writer_end_.Take());
      } else {
        auto pair = protocol::SocketPair();
        if (pair.ok()) channel = std::move(pair).value();
      }
    }
    // Rollback on: so does the socket of the snapshot this process forks
    // once the host has the Result (the pair was made while it waited).
    UniqueFd snapshot_host_end;
    if (!keeps_snapshot && settings_.snapshots) {
      snapshot_host_end = snapshot_host_end_.Take();
      if (!snapshot_host_end || !snapshot_socket_) {
        snapshot_host_end.Reset();
        snapshot_socket_.Reset();
        auto pair = protocol::SocketPair();
        auto guarded = pair.ok() ? GuardedFd::Create(std::move(pair->second))
                                 : StatusOr<GuardedFd>(pair.status());
        if (guarded.ok()) {
          snapshot_host_end = std::move(pair->first);
          snapshot_socket_ = std::move(guarded).value();
        }
      }
    }
    w.U32(static_cast<std::uint32_t>(::getpid()));
    w.U8((channel ? protocol::kCarriesCheckpointChannel : 0) |
         (snapshot_host_end ? protocol::kCarriesSnapshotSocket : 0) |
         (read_only ? protocol::kReadOnlyCell : 0) | (bindings ? protocol::kBindingCell : 0) |
         (names_unchanged ? protocol::kNamesUnchanged : 0));
    if (bindings) protocol::WriteBindings(w, *bindings);
    int fds[2] = {-1, -1};
    int carried = 0;
    if (channel) fds[carried++] = channel->first.get();
    if (snapshot_host_end) fds[carried++] = snapshot_host_end.get();
    if (checkpoint && !SendCheckpointData(socket_.get(), *checkpoint).ok()) Exit(0);  // host gone
    Send(Tag::kResult, w.data(), fds[0], fds[1]);
    refresh_due_ = settings_.snapshots;
    if (keeps_snapshot) {
      // Its owed checkpoint: written by a child of this state, the snapshot
      // from before the cell staying the rollback point.
      if (channel) WriteCheckpointAside(std::move(channel->second));
      return;
    }
    snapshot_host_end.Reset();
    background_.Set(settings_.snapshots || channel.has_value());
    checkpoint.reset();
    if (channel) channel->first.Reset();
    if (settings_.snapshots) {
      // Without a snapshot socket the host holds no snapshot any more: the
      // previous one is retired all the same (ForkSnapshot).
      (void)AfterCell(channel ? std::move(channel->second) : UniqueFd());
    } else if (channel) {
      WriteCheckpointAside(std::move(channel->second));
    }
  }

  // After a Result whose cell forks no snapshot: writes this state's async
  // checkpoint on `writer_channel`, by a child forked once the host has read
  // the Result. A new session's state (its snapshot holds a new session,
  // every cell since was proven: PristineState) is the few names its
  // binding cells bound, whose values the host holds already under 1 MiB:
  // written by this process, with no fork, and not at once
  // (WriteDeferredCheckpoint), unless a writer is running (the host reads
  // each session's checkpoints in order).
  void WriteCheckpointAside(UniqueFd writer_channel) {
    if (pristine_.held() && !WriterRunning() && !pending_channel_) {
      deferred_checkpoint_ = std::move(writer_channel);
      return;
    }
    background_.Set(true);
    WaitHostRead(socket_.get());
    PreloadSerializers(globals_);  // the writer inherits dill (see checkpoint.h)
    ForkCheckpointWriter(std::move(writer_channel));
    background_.Set(false);
  }

  // The checkpoint WriteCheckpointAside left to this process, written before
  // the host's next request is served, or once none has come for
  // kDeferredCheckpointIdle; given up (its channel closed, which the host
  // skips) when that request is RENEW_IN_PLACE: the session it was of has
  // ended and its stored state is gone (a loop of one-cell sessions then
  // serializes nothing). Serialized here when it comes to at most
  // kInlineCheckpointBytes (the socket's buffer takes it whole, so this
  // process never waits for the host's saver to read), else by a writer.
  static constexpr std::chrono::milliseconds kDeferredCheckpointIdle{2};
  static constexpr std::size_t kInlineCheckpointBytes = 64 * 1024;
  void WriteDeferredCheckpoint() {
    if (!deferred_checkpoint_) return;
    UniqueFd channel = std::move(deferred_checkpoint_);
    Status idle;
    Py_BEGIN_ALLOW_THREADS
    idle = protocol::WaitReadable(socket_.get(),
                                  std::chrono::steady_clock::now() + kDeferredCheckpointIdle);
    Py_END_ALLOW_THREADS
    if (idle.ok() && protocol::PeekTag(socket_.get()) == Tag::kRenewInPlace) return;
    NamespacePieces ns = Serialize(/*may_delta=*/true);
    if (ns.size <= kInlineCheckpointBytes) {
      // A channel the host closed meanwhile (it gave the checkpoint up)
      // fails here, as a writer's would: nothing else to do.
      (void)SendCheckpointData(channel.get(), ns);
      return;  // the channel closes here: the host has it all
    }
    PreloadSerializers(globals_);
    ForkCheckpointWriter(std::move(channel));
  }

  // Binds this cell's tools (as builtins: this process holds one session)
  // and variables (host_variables.h). Needs the GIL.
  Status BindExtras(const CellTools& tools, const std::vector<ReceivedVariable>& variables,
                    bool* variables_changed, std::vector<std::string>* plain_variables) {
    PyObject* builtins = builtins_;
    if (!tools.names.empty() && transport_ == nullptr) {
      transport_ = tools_.NewTransport();
      if (transport_ == nullptr) {
        PyErr_Clear();
        return Status(ErrorCode::kInternal, "cannot make the host tools' transport");
      }
    }
    DOLSOT_RETURN_IF_ERROR(BindCellTools(builtins, tools, transport_));
    return variables_.Bind(globals_, variables, variables_changed, plain_variables);
  }

  ToolChannel tools_;
  PyObject* transport_ = nullptr;        // tools_.NewTransport(), made on first need
  HostVariables variables_;              // the values the host sent, kept for the next cells
  GuardedFd socket_;  // guarded: a cell's forked children do not keep it
  GuardedFd keeper_;  // the session end of the keeper's channel (session_keeper.h)
  const WorkerSettings& settings_;
  std::vector<std::string> aliases_;
  int host_pidfd_ = -1;  // the host process (inherited from the worker), or -1
  PyObject* globals_ = nullptr;
  PyObject* builtins_ = nullptr;  // the builtins module's dict (borrowed: it lives as long as we do)
  Role role_ = Role::kRunner;
  pid_t snapshot_pid_ = -1;          // the runner's current snapshot (its child)
  pid_t runner_pid_ = -1;            // a snapshot's runner (its parent)
  UniqueFd runner_pidfd_;            // and a pidfd pinning it
  std::vector<pid_t> helpers_;
  HotPages hot_;
  UnsaveableNames unsaveable_;       // async checkpoints: what a Result reports as dropped
  PristineState pristine_;           // held while the snapshot holds a new session (RenewInPlace)
  // The base the store holds and its values' digests, as RUN last said:
  // checkpoints after a cell may be deltas against it. Forks inherit it,
  // which the host knows (it tells a promoted snapshot again).
  std::optional<BaseDigests> delta_base_;
  Background background_;
  std::uint64_t cells_run_ = 0;      // cells this session ran (the last one's number)
  bool refresh_due_ = false;         // a cell ran since the snapshot was last refreshed
  bool python_deferred_ = false;     // a snapshot before FinishDeferredFork (engine_fork.h)
  UniqueFd pending_channel_;         // the newest channel while a writer runs
  UniqueFd deferred_checkpoint_;     // WriteCheckpointAside's, for WriteDeferredCheckpoint
  UniqueFd writer_pidfd_;            // the last writer started (inherited)
  UniqueFd waiting_writer_pidfd_;    // rollback off: the newest, waiting for it
  // Made by PrepareReplyChannels, used by the next Result.
  GuardedFd checkpoint_host_end_;    // async checkpoint channel: the host's end
  GuardedFd checkpoint_writer_end_;  // and the writer's
  GuardedFd snapshot_host_end_;      // the host's end of the next snapshot's socket
  GuardedFd snapshot_socket_;        // the next snapshot's end
};

}  // namespace

void ServeSession(UniqueFd socket, const WorkerSettings& settings, bool expect_load,
                  int host_pidfd, UniqueFd keeper_link) {
  SessionProcess process(std::move(socket), settings, host_pidfd, std::move(keeper_link));
  process.Serve(expect_load);
}

}  // namespace dolsot
