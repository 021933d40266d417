// The host side of one live session: cell round trips under a deadline,
// kill-and-rollback, checkpoints and branches.
#include "backend_subprocess/live_session.h"

#include <fcntl.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "backend_subprocess/tool_replies.h"
#include "core/child_process.h"
#include "embedded/cell_runner.h"

namespace dolsot {
namespace {

using protocol::Clock;
using protocol::Deadline;
using protocol::Frame;
using protocol::PayloadReader;
using protocol::PayloadWriter;
using protocol::Tag;

constexpr std::size_t kMaxKeptOutput = 64u << 20;
constexpr auto kPollSlice = std::chrono::milliseconds(50);
constexpr auto kReapGrace = std::chrono::seconds(10);

// A pid a session process reports. Never 1 (kill(-1) would signal every
// process of this user) nor <= 0: a cell's code can write these frames, and
// the host checks each pid further before it records or signals it
// (process_identity.h).
bool PlausiblePid(pid_t pid) { return pid > 1; }

// The host's end of a session process's socket, asking the kernel to attest
// who writes on it (RESULT's sender is checked against it). Set before the
// host sends anything the process answers; if it fails (it does not on
// Linux), RESULT frames are refused for want of an attested sender.
UniqueFd Attested(UniqueFd socket) {
  if (socket) (void)protocol::AttestSenders(socket.get());
  return socket;
}

// A RUNNER or BRANCHED frame from `parent`: {pid} of its new child, and the
// host's end of that child's socket.
StatusOr<ProcessChannel> ChannelFrom(Frame& frame, const char* what,
                                     const ProcessIdentity& parent) {
  PayloadReader r(frame.payload);
  auto pid = static_cast<pid_t>(r.U32());
  if (!r.Finish(what).ok() || !frame.fd || !PlausiblePid(pid)) {
    return CorruptError(std::string("malformed ") + what + " frame (no channel)");
  }
  ProcessChannel channel;
  channel.socket = Attested(std::move(frame.fd));
  channel.process = ProcessIdentity::ChildOf(parent, pid);
  return channel;
}

std::string FormatSeconds(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

}  // namespace

StatusOr<CheckpointData> ParseCheckpointData(std::string_view payload) {
  PayloadReader r(payload);
  CheckpointData data;
  data.saved = r.Strs();
  data.dropped = r.Strs();
  data.blob = r.Str();
  DOLSOT_RETURN_IF_ERROR(r.Finish("CHECKPOINT_DATA"));
  return data;
}

LiveSession::LiveSession(const WorkerSettings& settings)
    : snapshots_(settings.snapshots) {}

LiveSession::~LiveSession() { Kill(); }

StatusOr<std::unique_ptr<LiveSession>> LiveSession::Start(ProcessChannel channel,
                                                          std::string_view blob,
                                                          const WorkerSettings& settings,
                                                          Deadline deadline, LoadReport* report) {
  std::unique_ptr<LiveSession> session(new LiveSession(settings));
  channel.socket = Attested(std::move(channel.socket));
  (session->snapshots_ ? session->standby_ : session->runner_) = std::move(channel);
  ProcessChannel& first = session->snapshots_ ? session->standby_ : session->runner_;
  DOLSOT_RETURN_IF_ERROR(protocol::WriteFrame(first.socket.get(), Tag::kLoad, blob));
  auto ready = protocol::ReadFrame(first.socket.get(), deadline);
  if (!ready.ok()) {
    return Status(ready.status().code() == ErrorCode::kTimeout ? ErrorCode::kTimeout
                                                               : ErrorCode::kUnavailable,
                  "the session process did not restore its checkpoint: " +
                      ready.status().message());
  }
  if (ready->tag != Tag::kReady) return CorruptError("expected READY from the session process");
  PayloadReader r(ready->payload);
  LoadReport loaded;
  loaded.restored = r.Strs();
  loaded.failed = r.Strs();
  loaded.error = r.Str();
  DOLSOT_RETURN_IF_ERROR(r.Finish("READY"));
  session->held_ = loaded.restored;
  if (report != nullptr) *report = std::move(loaded);
  session->runner_pending_ = session->snapshots_;
  session->restored_no_cell_ = !session->snapshots_;
  return session;
}

std::unique_ptr<LiveSession> LiveSession::Adopt(ProcessChannel channel,
                                                const WorkerSettings& settings) {
  std::unique_ptr<LiveSession> session(new LiveSession(settings));
  channel.socket = Attested(std::move(channel.socket));
  (session->snapshots_ ? session->standby_ : session->runner_) = std::move(channel);
  session->runner_pending_ = session->snapshots_;
  return session;
}

void LiveSession::Kill() {
  // The retired standby is not signalled (its pid may be reused once the new
  // standby killed it): closing its socket ends it if it is still alive.
  retired_ = ProcessChannel{};
  // Not sent yet: the runner was not forked, or is just starting; it dies
  // with the standby (PR_SET_PDEATHSIG).
  ReadPendingRunnerPid(Clock::now());
  for (ProcessChannel* c : {&runner_, &standby_}) {
    c->process.Kill();  // the process and its group, if the host can vouch for it
    c->socket.Reset();
    c->process = ProcessIdentity();
  }
  runner_pending_ = false;
}

Status LiveSession::AcceptRunner(Frame frame) {
  if (!frame.fd && runner_.socket && !runner_.process.known()) {
    // Its socket came with the last Result: only the pid is new.
    PayloadReader r(frame.payload);
    auto pid = static_cast<pid_t>(r.U32());
    if (!r.Finish("RUNNER").ok() || !PlausiblePid(pid)) {
      return CorruptError("malformed RUNNER frame");
    }
    runner_.process = ProcessIdentity::ChildOf(standby_.process, pid);
  } else {
    auto channel = ChannelFrom(frame, "RUNNER", standby_.process);
    if (!channel.ok()) return channel.status();
    runner_ = std::move(channel).value();
  }
  runner_pending_ = false;
  return Status::Ok();
}

Status LiveSession::EnsureRunner(Deadline deadline, const ChannelHandler& on_channel) {
  while (runner_pending_) {
    int source = standby_.socket.get();
    if (source < 0) return Status(ErrorCode::kUnavailable, "the session process is gone");
    auto frame = protocol::ReadFrame(source, deadline);
    if (!frame.ok()) return frame.status();
    switch (frame->tag) {
      case Tag::kRunner:
        // The pid alone, and no socket waits for it: the pid of a runner
        // that died before it was read.
        if (!frame->fd && !runner_.socket) break;
        DOLSOT_RETURN_IF_ERROR(AcceptRunner(std::move(frame).value()));
        break;
      case Tag::kDied:
        break;  // a death already reported (or not waited for: RunnerDied)
      default:
        return CorruptError(std::string("unexpected frame ") + protocol::TagName(frame->tag));
    }
  }
  if (!runner_.socket) return Status(ErrorCode::kUnavailable, "the session has no runner");
  return Status::Ok();
}

void LiveSession::ReadPendingRunnerPid(Clock::time_point deadline) {
  if (runner_pending_ && runner_.socket && !runner_.process.known() && standby_.socket) {
    (void)EnsureRunner(deadline, nullptr);
  }
}

Status LiveSession::Settle(Deadline deadline, const ChannelHandler& on_channel) {
  return EnsureRunner(deadline, on_channel);
}

Status LiveSession::SendRun(const CellRun& run, std::map<std::string, std::string>* sent) {
  PayloadWriter w;
  w.U64(run.max_output).Str(run.code);
  static const CellTools kNoTools;
  const CellTools& tools = run.tools != nullptr ? *run.tools : kNoTools;
  w.Strs(tools.names).Str(tools.final_name);
  std::size_t count = run.variables != nullptr ? run.variables->size() : 0;
  w.U32(static_cast<std::uint32_t>(count));
  *sent = variable_digests_;
  for (std::size_t i = 0; i < count; ++i) {
    const CellVariable& v = (*run.variables)[i];
    w.Str(v.name);
    auto held = variable_digests_.find(v.name);
    // Sent again only when the session does not hold these very bytes.
    if (held != variable_digests_.end() && !v.digest.empty() && held->second == v.digest) {
      w.U8(1);
      continue;
    }
    w.U8(0).Str(v.pickle != nullptr ? *v.pickle : std::string());
    (*sent)[v.name] = v.digest;
  }
  return protocol::WriteFrame(runner_.socket.get(), Tag::kRun, w.data());
}

void LiveSession::DispatchToolCall(const CellRun& run, const Frame& frame,
                                   const std::shared_ptr<ToolReplies>& replies) {
  PayloadReader r(frame.payload);
  std::uint64_t id = r.U64();
  ToolCall call;
  call.name = r.Str();
  call.arguments = r.Str();
  call.session_id = std::string(run.session_id);
  if (!r.Finish("TOOL_CALL").ok()) return;  // malformed: its caller waits until the deadline
  const CellTools* tools = run.tools;
  bool known = tools != nullptr && tools->dispatch &&
               std::find(tools->names.begin(), tools->names.end(), call.name) != tools->names.end();
  if (!known) {
    // No reply pickle can be made here (no Python): an empty payload tells
    // the session the tool is gone.
    replies->Send(id, ToolReply{false, std::string()});
    return;
  }
  std::weak_ptr<ToolReplies> weak = replies;
  tools->dispatch(std::move(call), [weak, id](ToolReply reply) {
    if (auto target = weak.lock()) target->Send(id, reply);
  });
}

StatusOr<CellOutcome> LiveSession::Run(const CellRun& run, const ChannelHandler& on_channel) {
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(run.timeout_seconds));
  // When the runner's socket came with the last Result there is nothing to
  // wait for: the cell goes out at once, and the runner's pid comes with its
  // Result (read from the standby only if the runner must be killed first).
  Status ready = runner_.socket ? Status::Ok() : EnsureRunner(deadline, on_channel);
  if (!ready.ok()) {
    bool timed_out = ready.code() == ErrorCode::kTimeout;
    Kill();
    CellOutcome outcome;
    outcome.session_lost = true;
    outcome.result = Result::Failure(
        timed_out ? Outcome::kTimeout : Outcome::kWorkerLost,
        timed_out ? kExitTimeout : kExitFailure,
        "the session's process was lost before the cell ran (" + ready.message() +
            "); it will be restored from its last checkpoint");
    return outcome;
  }
  std::map<std::string, std::string> variables_after;
  Status sent = SendRun(run, &variables_after);
  if (!sent.ok()) return RunnerDied(run, false, false, {});
  auto outcome = AwaitResult(run, deadline, on_channel);
  // The session holds what was sent only if the cell completed (a rollback
  // restores the state from before it, cache included).
  if (outcome.ok() && !outcome->session_lost &&
      (outcome->result.outcome() == Outcome::kOk || outcome->result.outcome() == Outcome::kError)) {
    variable_digests_ = std::move(variables_after);
  }
  return outcome;
}

StatusOr<CellOutcome> LiveSession::AwaitResult(const CellRun& run, Clock::time_point deadline,
                                               const ChannelHandler& on_channel) {
  std::string output;
  int socket = runner_.socket.get();
  // Made on the first tool call; closed when this returns, so a reply that
  // comes later (an abandoned tool) is dropped and never meets the frames
  // this thread writes on the socket next.
  std::shared_ptr<ToolReplies> replies;
  struct CloseReplies {
    std::shared_ptr<ToolReplies>& replies;
    ~CloseReplies() {
      if (replies) replies->Close();
    }
  } close_replies{replies};
  for (;;) {
    Deadline wait_until = deadline;
    if (run.should_stop) wait_until = std::min(deadline, Clock::now() + kPollSlice);
    Status readable = protocol::WaitReadable(socket, wait_until);
    if (readable.code() == ErrorCode::kTimeout) {
      // Record why before killing, so the death is classified correctly.
      if (Clock::now() >= deadline) return RunnerDied(run, true, false, output);
      if (run.should_stop()) return RunnerDied(run, false, true, output);
      continue;
    }
    auto frame = protocol::ReadFrame(socket, deadline);
    if (!frame.ok()) {
      if (frame.status().code() == ErrorCode::kTimeout) return RunnerDied(run, true, false, output);
      return RunnerDied(run, false, false, output);
    }
    if (frame->tag == Tag::kOutput) {
      if (output.size() < kMaxKeptOutput) output.append(frame->payload);
      continue;
    }
    if (frame->tag == Tag::kToolCall) {
      if (!replies) {
        replies = std::make_shared<ToolReplies>(UniqueFd(::fcntl(socket, F_DUPFD_CLOEXEC, 0)));
      }
      DispatchToolCall(run, *frame, replies);
      continue;
    }
    if (frame->tag != Tag::kResult) {
      return CorruptError(std::string("unexpected frame ") + protocol::TagName(frame->tag) +
                          " while a cell ran");
    }
    PayloadReader r(frame->payload);
    CellOutcome outcome;
    outcome.result = protocol::ReadResult(r);
    if (r.U8() != 0) {
      CheckpointData data;
      data.saved = r.Strs();
      data.blob = r.Str();
      data.dropped = outcome.result.dropped;
      outcome.checkpoint = std::move(data);
    }
    auto runner_pid = static_cast<pid_t>(r.U32());
    std::uint8_t carried = r.U8();
    DOLSOT_RETURN_IF_ERROR(r.Finish("RESULT"));
    if (!PlausiblePid(runner_pid)) return CorruptError("RESULT without the runner's pid");
    auto runner = ProcessIdentity::FromSender(*frame, runner_pid, "RESULT");
    if (!runner.ok()) return runner.status();
    runner_.process = *runner;
    // The descriptors that came with it, in order.
    UniqueFd* next_fd = &frame->fd;
    UniqueFd checkpoint_channel, runner_socket;
    if (carried & protocol::kCarriesCheckpointChannel) {
      checkpoint_channel = std::move(*next_fd);
      next_fd = &frame->fd2;
    }
    if (carried & protocol::kCarriesRunnerSocket) {
      runner_socket = Attested(std::move(*next_fd));
      // The session forks that runner on this socket and will not send another.
      if (!runner_socket) return CorruptError("the next runner's socket did not come with RESULT");
    }
    if (checkpoint_channel && on_channel) on_channel(std::move(checkpoint_channel));
    held_ = outcome.result.held;
    restored_no_cell_ = false;
    if (snapshots_) {
      // The runner now holds the state: it is the new standby. Once we have
      // read this Result it notes the pages the cell wrote, retires the old
      // standby (its parent) itself and forks a new runner. The old standby's
      // socket stays open until then (closing it would end that process
      // early, and the new standby dies with it until it has forked). The
      // standby before that one is retired, or about to be, and nothing
      // depends on it any more (the runner that sent this Result was forked
      // after its parent stopped dying with it): its socket goes to the
      // caller, to close off the critical path.
      outcome.retired_socket = std::move(retired_.socket);
      retired_ = std::move(standby_);
      standby_ = std::move(runner_);
      runner_ = ProcessChannel{};
      runner_.socket = std::move(runner_socket);  // its pid comes with its Result
      // A RUNNER frame of the old standby's, unread, is dropped with it.
      runner_pending_ = true;
    }
    return outcome;
  }
}

CellOutcome LiveSession::RunnerDied(const CellRun& run, bool timed_out, bool interrupted,
                                    const std::string& output) {
  ReadPendingRunnerPid(Clock::now() + kReapGrace);
  runner_.process.Kill();
  runner_.socket.Reset();
  runner_.process = ProcessIdentity();
  CellOutcome outcome;
  outcome.interrupted = interrupted;
  Result& r = outcome.result;
  r.ok = false;
  r.stdout_text = CapOutput(output, run.max_output);
  std::string how;
  bool rolled_back = false;
  if (snapshots_ && standby_.socket) {
    // The standby reaps the runner and forks a new one from the pre-cell state.
    Status told = protocol::WriteFrame(standby_.socket.get(), Tag::kRunnerDied, {});
    if (told.ok() && (timed_out || interrupted)) {
      // Killed here: its wait status would add nothing, so the Result does
      // not wait for the reap (~0.5 ms or more for a big runner); the
      // standby's DIED frame is skipped later (EnsureRunner).
      rolled_back = true;
    } else if (told.ok()) {
      auto grace = Clock::now() + kReapGrace;
      StatusOr<Frame> died = protocol::ReadFrame(standby_.socket.get(), grace);
      // A RUNNER frame not read yet (the runner died before its pid was
      // needed) comes first.
      while (died.ok() && died->tag == Tag::kRunner) {
        died = protocol::ReadFrame(standby_.socket.get(), grace);
      }
      if (died.ok() && died->tag == Tag::kDied) {
        PayloadReader pr(died->payload);
        how = DescribeWaitStatus(pr.I32());
        rolled_back = true;
      }
    }
    if (rolled_back) runner_pending_ = true;
  }
  // Restored and no cell yet: the checkpoint it goes back to is the state
  // before this cell.
  bool as_before = rolled_back || restored_no_cell_;
  if (!rolled_back) {
    Kill();
    outcome.session_lost = true;
    if (!restored_no_cell_) held_.clear();
  }
  std::string after = as_before
                          ? "the session was rolled back to its state before this cell"
                          : "the session goes back to its last checkpoint";
  // The reason was recorded before the kill, so it is set first and wins.
  if (timed_out) {
    r.SetOutcome(Outcome::kTimeout);
    r.exit_code = kExitTimeout;
    r.error = "TimeoutError: the cell ran past its " + FormatSeconds(run.nominal_timeout) +
              " s timeout and was killed; " + after;
  } else if (interrupted) {
    r.SetOutcome(Outcome::kInterrupted);
    r.exit_code = kExitInterrupted;
    r.error = "KeyboardInterrupt: the cell was interrupted and killed; " + after;
  } else {
    r.SetOutcome(Outcome::kCrashed);
    r.exit_code = kExitFailure;
    r.error = "WorkerError: the cell's process died" + (how.empty() ? "" : " (" + how + ")") +
              "; " + after;
  }
  r.error_type = DefaultErrorType(r.outcome());
  r.held = held_;
  return outcome;
}

StatusOr<CheckpointData> LiveSession::Checkpoint(Deadline deadline, const ChannelHandler& on_channel) {
  DOLSOT_RETURN_IF_ERROR(EnsureRunner(deadline, on_channel));
  DOLSOT_RETURN_IF_ERROR(protocol::WriteFrame(runner_.socket.get(), Tag::kCheckpoint, {}));
  auto frame = protocol::ReadFrame(runner_.socket.get(), deadline);
  if (!frame.ok()) return frame.status();
  if (frame->tag != Tag::kCheckpointData) return CorruptError("expected CHECKPOINT_DATA");
  return ParseCheckpointData(frame->payload);
}

StatusOr<ProcessChannel> LiveSession::Branch(Deadline deadline, const ChannelHandler& on_channel) {
  DOLSOT_RETURN_IF_ERROR(EnsureRunner(deadline, on_channel));
  DOLSOT_RETURN_IF_ERROR(protocol::WriteFrame(runner_.socket.get(), Tag::kBranch, {}));
  auto frame = protocol::ReadFrame(runner_.socket.get(), deadline);
  if (!frame.ok()) return frame.status();
  if (frame->tag != Tag::kBranched) return CorruptError("expected BRANCHED");
  return ChannelFrom(*frame, "BRANCHED", runner_.process);
}

}  // namespace dolsot
