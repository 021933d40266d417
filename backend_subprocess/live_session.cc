// The host side of one live session: cell round trips under a deadline,
// kill-and-rollback, checkpoints and branches.
#include "backend_subprocess/live_session.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "backend_subprocess/tool_pipes.h"
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

// A BRANCHED frame from `parent`: {pid} of its new child, and the
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

StatusOr<CheckpointData> ParseCheckpointData(std::string payload) {
  if (payload.size() < 8) return CorruptError("CHECKPOINT_DATA: shorter than its blob's size");
  PayloadReader tail(std::string_view(payload).substr(payload.size() - 8));
  const std::uint64_t blob_size = tail.U64();
  if (blob_size > payload.size() - 8) {
    return CorruptError("CHECKPOINT_DATA: a blob of " + std::to_string(blob_size) +
                        " bytes in a payload of " + std::to_string(payload.size()));
  }
  PayloadReader r(std::string_view(payload).substr(blob_size, payload.size() - 8 - blob_size));
  CheckpointData data;
  data.saved = r.Strs();
  data.dropped = r.Strs();
  const std::uint8_t delta = r.U8();
  if (delta > 1) return CorruptError("CHECKPOINT_DATA: a delta flag of " + std::to_string(delta));
  data.delta = delta == 1;
  if (data.delta) {
    data.delta_of.size = r.U64();
    data.delta_of.fingerprint = r.U32();
    data.kept = r.Strs();
  }
  DOLSOT_RETURN_IF_ERROR(r.Finish("CHECKPOINT_DATA"));
  for (std::size_t i = 0; i < data.kept.size(); ++i) {
    if (data.kept[i].empty() || data.kept[i].find('\0') != std::string::npos ||
        (i > 0 && !(data.kept[i - 1] < data.kept[i]))) {
      return CorruptError(
          "CHECKPOINT_DATA: kept names that are empty, hold a NUL byte or are not in ascending "
          "order");
    }
  }
  payload.resize(blob_size);
  data.blob = std::move(payload);
  return data;
}

LiveSession::LiveSession(const WorkerSettings& settings)
    : snapshots_(settings.snapshots), sync_checkpoints_(settings.checkpoint == CheckpointMode::kSync) {}

LiveSession::~LiveSession() { Kill(); }

StatusOr<std::unique_ptr<LiveSession>> LiveSession::Start(ProcessChannel channel,
                                                          std::string_view blob,
                                                          const WorkerSettings& settings,
                                                          Deadline deadline, LoadReport* report,
                                                          std::weak_ptr<WorkerProcess> worker) {
  std::unique_ptr<LiveSession> session(new LiveSession(settings));
  session->worker_ = std::move(worker);
  channel.socket = Attested(std::move(channel.socket));
  session->runner_ = std::move(channel);
  ProcessChannel& first = session->runner_;
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
  session->runner_frame_due_ = session->snapshots_;
  session->restored_no_cell_ = !session->snapshots_;
  // Its first snapshot forks after LOAD, before any cell: an empty blob
  // leaves it a new session's state.
  session->fresh_snapshot_ = session->snapshots_ && blob.empty();
  return session;
}

std::unique_ptr<LiveSession> LiveSession::Adopt(ProcessChannel channel,
                                                const WorkerSettings& settings,
                                                std::weak_ptr<WorkerProcess> worker) {
  std::unique_ptr<LiveSession> session(new LiveSession(settings));
  session->worker_ = std::move(worker);
  channel.socket = Attested(std::move(channel.socket));
  session->runner_ = std::move(channel);
  session->runner_frame_due_ = session->snapshots_;
  session->delta_known_ = false;  // it forked with its parent's base digests
  return session;
}

void LiveSession::Kill() {
  // The runner's pid may still be due in its RUNNER frame (a promoted
  // snapshot): read if it is there already, to kill a runner that is busy.
  ReadPendingRunner(Clock::now());
  runner_.process.Kill();  // the process and its group, if the host can vouch for it
  // A snapshot is never signalled: idle, it exits when its socket closes
  // (and its runner, which forked it, may have reaped it and freed the pid).
  for (ProcessChannel* c : {&runner_, &snapshot_}) {
    c->socket.Reset();
    c->process = ProcessIdentity();
  }
  runner_frame_due_ = false;
  fresh_snapshot_ = false;
  recycling_ = false;
  renewing_in_place_ = false;
}

bool LiveSession::Recyclable() const {
  // Anything unread from the runner (a SNAPSHOT_REFRESHED after an idle
  // second: the snapshot held here is retired) leaves it as it is.
  // A branch forked from its runner shares its keeper (and is its child).
  return recycling_allowed_ && snapshots_ && fresh_snapshot_ && !branched_ && snapshot_.socket &&
         runner_.socket && runner_.process.known() && !runner_frame_due_ &&
         !protocol::Readable(runner_.socket.get());
}

Status LiveSession::Recycle() {
  if (!Recyclable()) {
    return Status(ErrorCode::kInvalidArgument,
                  "the session cannot be recycled: its snapshot is not a new session's");
  }
  // The runner itself, when no cell was given the host's tools (their
  // transport stays with the process): RENEW_IN_PLACE, which it does not
  // answer. The next RUN follows it at once; a runner that cannot renew
  // exits instead of reading it, and Run renews the snapshot then
  // (RenewalRefused). Else, or when it cannot be asked, the snapshot is
  // renewed now.
  if (!tools_given_ &&
      protocol::WriteFrame(runner_.socket.get(), Tag::kRenewInPlace, {}).ok()) {
    renewing_in_place_ = true;
  } else {
    DOLSOT_RETURN_IF_ERROR(RenewSnapshot());
  }
  // Nothing of the ended session stays with the new one.
  held_.clear();
  names_reported_ = false;
  delta_known_ = false;
  delta_told_.reset();
  threads_.clear();
  variable_digests_.clear();
  pending_bindings_.Clear();
  restored_no_cell_ = false;
  return Status::Ok();
}

Status LiveSession::RenewalRefused() {
  renewing_in_place_ = false;
  renewal_refused_ = true;
  return Status(ErrorCode::kUnavailable, "the session's runner could not renew in place");
}

Status LiveSession::RenewSnapshot() {
  // As a rollback (RunnerDied): the runner and its group go first; the
  // snapshot also makes sure its runner is gone before it runs anything.
  runner_.process.Kill();
  runner_.socket.Reset();
  runner_.process = ProcessIdentity();
  renewing_in_place_ = false;
  runner_frame_due_ = false;
  Status promoted = snapshot_.socket ? PromoteSnapshot(Tag::kRenew, {})
                                     : Status(ErrorCode::kUnavailable, "no snapshot");
  if (!promoted.ok()) {
    Kill();
    return Status(ErrorCode::kUnavailable, "the session's snapshot is gone: " + promoted.message());
  }
  recycling_ = true;
  return Status::Ok();
}

Status LiveSession::PromoteSnapshot(Tag tag, std::string_view payload) {
  promoted_at_ns_ = BootTimeNs();
  DOLSOT_RETURN_IF_ERROR(protocol::WriteFrame(snapshot_.socket.get(), tag, payload));
  runner_ = std::move(snapshot_);
  snapshot_ = ProcessChannel{};
  runner_frame_due_ = true;
  return Status::Ok();
}

Status LiveSession::AcceptRunner(Frame& frame) {
  PayloadReader r(frame.payload);
  auto pid = static_cast<pid_t>(r.U32());
  DOLSOT_RETURN_IF_ERROR(r.Finish("RUNNER"));
  if (!runner_frame_due_) return CorruptError("unexpected RUNNER frame");
  if (!PlausiblePid(pid)) return CorruptError("malformed RUNNER frame");
  if (runner_.process.known()) {
    // Restored or branched: the host knows the pid already and learns
    // nothing from this frame's word (a branch may write it before the host
    // asked the kernel to attest its socket's writers).
    if (runner_.process.namespace_pid() != pid) {
      return CorruptError("RUNNER names pid " + std::to_string(pid) + ", not the session's " +
                          std::to_string(runner_.process.namespace_pid()));
    }
  } else {
    // A promoted snapshot, whose socket was attested from the start: the
    // kernel must vouch for the pid, and the process existed when promoted.
    auto sender = ProcessIdentity::FromSender(frame, pid, "RUNNER");
    if (!sender.ok()) return sender.status();
    runner_.process = sender->VouchedAsOf(promoted_at_ns_);
    // Its own snapshot forked before it ran a cell: a new session's state
    // only when what was promoted was (Recycle), not after a rollback.
    fresh_snapshot_ = recycling_;
    recycling_ = false;
  }
  if (frame.fd && !snapshots_) return CorruptError("a snapshot's socket with rollback off");
  snapshot_.socket = Attested(std::move(frame.fd));
  runner_frame_due_ = false;
  return Status::Ok();
}

Status LiveSession::AdoptRefreshedSnapshot(Frame& frame) {
  if (!snapshots_ || !frame.fd || !frame.payload.empty() || runner_frame_due_) {
    return CorruptError("a SNAPSHOT_REFRESHED frame without a snapshot's socket, out of turn, "
                        "or with rollback off");
  }
  snapshot_.socket = Attested(std::move(frame.fd));  // the old one's socket closes
  pending_bindings_.Clear();
  fresh_snapshot_ = false;  // it holds what the runner's cells did
  return Status::Ok();
}

void LiveSession::AdoptRefreshedLeftUnread() {
  if (!snapshots_ || !runner_.socket || runner_frame_due_) return;
  // The runner is gone or going: what it sent is all in the socket.
  while (protocol::Readable(runner_.socket.get())) {
    auto frame = protocol::ReadFrame(runner_.socket.get(), Clock::now() + kReapGrace);
    if (!frame.ok()) return;
    if (frame->tag == Tag::kSnapshotRefreshed) (void)AdoptRefreshedSnapshot(*frame);
  }
}

StatusOr<Frame> LiveSession::ReadFromRunner(Deadline deadline) {
  for (;;) {
    auto frame = protocol::ReadFrame(runner_.socket.get(), deadline);
    if (!frame.ok()) return frame;
    if (frame->tag != Tag::kSnapshotRefreshed) renewing_in_place_ = false;  // it renewed
    if (frame->tag == Tag::kRunner) {
      DOLSOT_RETURN_IF_ERROR(AcceptRunner(*frame));
    } else if (frame->tag == Tag::kSnapshotRefreshed) {
      DOLSOT_RETURN_IF_ERROR(AdoptRefreshedSnapshot(*frame));
    } else {
      return frame;
    }
  }
}

void LiveSession::ReadPendingRunner(Clock::time_point deadline) {
  if (!runner_frame_due_ || !runner_.socket) return;
  // Nothing else comes before it on this socket.
  if (Clock::now() >= deadline && !protocol::Readable(runner_.socket.get())) return;
  auto frame = protocol::ReadFrame(runner_.socket.get(), deadline);
  if (frame.ok() && frame->tag == Tag::kRunner) (void)AcceptRunner(*frame);
}

Status LiveSession::Settle(Deadline deadline, const ChannelHandler&) {
  if (!runner_.socket) return Status(ErrorCode::kUnavailable, "the session has no runner");
  if (runner_frame_due_) {
    auto frame = protocol::ReadFrame(runner_.socket.get(), deadline);
    if (!frame.ok()) return frame.status();
    if (frame->tag != Tag::kRunner) return CorruptError("expected RUNNER");
    return AcceptRunner(*frame);
  }
  return Status::Ok();
}

Status LiveSession::SendRun(const CellRun& run, std::map<std::string, std::string>* sent) {
  PayloadWriter w;
  w.U64(run.max_output).Str(run.code);
  static const CellTools kNoTools;
  const CellTools& tools = run.tools != nullptr ? *run.tools : kNoTools;
  if (!tools.names.empty()) tools_given_ = true;  // their transport stays with the runner
  w.Strs(tools.names).Str(tools.final_name).U8(tools.serve_pipes ? 1 : 0);
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
  // Past this much kept for the snapshot, the cell forks a new one (a
  // checkpoint follows it too) and the host lets the bindings go.
  const bool snapshot_owed = pending_bindings_.bytes() > kMaxPendingBindingBytes;
  std::uint8_t flags = (run.checkpoint_owed || snapshot_owed ? protocol::kRunCheckpointOwed : 0) |
                       (snapshot_owed ? protocol::kRunSnapshotOwed : 0) |
                       (names_reported_ ? protocol::kRunHostHasNames : 0);
  if (run.live != nullptr) {
    flags |= protocol::kRunLiveOutput | (run.live->wants_images() ? protocol::kRunLiveImages : 0);
  }
  const bool tell_base = !delta_known_ || delta_told_ != run.delta_base;
  if (tell_base) flags |= run.delta_base ? protocol::kRunDeltaBase : protocol::kRunNoDeltaBase;
  w.U8(flags);
  if (tell_base && run.delta_base) protocol::WriteBaseDigests(w, *run.delta_base);
  Status written = protocol::WriteFrame(runner_.socket.get(), Tag::kRun, w.data());
  if (tell_base) {
    delta_known_ = written.ok();
    delta_told_ = run.delta_base;
  }
  return written;
}

void LiveSession::DispatchToolCall(const CellRun& run, const Frame& frame,
                                   const std::shared_ptr<ToolReplies>& replies) {
  auto message = protocol::ReadToolCall(frame.payload);
  if (!message.ok()) return;  // malformed: its caller waits until the deadline
  std::uint64_t id = message->id;
  ToolCall call = std::move(message->call);
  call.session_id = std::string(run.session_id);
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

void LiveSession::AcceptToolPipes(const CellRun& run, protocol::Frame& frame, UniqueFd* stop) {
  // One pair per cell, to a host that serves them, and only a pipe's read
  // end and a pipe's write end (the cell's code may have written this
  // frame). Anything else is closed here, which fails the call the session
  // sent there.
  if (*stop || run.tools == nullptr || !run.tools->serve_pipes) return;
  auto pipes = ::dolsot::AcceptToolPipes(std::move(frame.fd), std::move(frame.fd2));
  if (!pipes.ok()) return;
  UniqueFd kept(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  UniqueFd served(kept ? ::fcntl(kept.get(), F_DUPFD_CLOEXEC, 0) : -1);
  if (!served) return;
  if (run.tools->serve_pipes(std::make_unique<ToolPipesHost>(std::move(*pipes), std::move(served)),
                             run.session_id)) {
    *stop = std::move(kept);
  }
}

StatusOr<CellOutcome> LiveSession::Run(const CellRun& run, const ChannelHandler& on_channel) {
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(run.timeout_seconds));
  // The cell goes out at once; a RUNNER frame still due is read with the
  // cell's first reply.
  if (!runner_.socket) {
    Kill();
    CellOutcome outcome;
    outcome.session_lost = true;
    outcome.result = Result::Failure(Outcome::kWorkerLost, kExitFailure,
                                     "the session's process was lost before the cell ran; it "
                                     "will be restored from its last checkpoint");
    return outcome;
  }
  std::map<std::string, std::string> variables_after;
  Status sent = SendRun(run, &variables_after);
  if (!sent.ok() && !renewing_in_place_) return RunnerDied(run, false, false, {});
  StatusOr<CellOutcome> outcome =
      sent.ok() ? AwaitResult(run, deadline, on_channel) : StatusOr<CellOutcome>(RenewalRefused());
  if (renewal_refused_) {
    renewal_refused_ = false;
    // The runner ended before it read this RUN, which it was never to run
    // (RenewInPlace): its snapshot, if it still holds a new session, runs
    // it (not one an idle runner refreshed before it ended).
    if (!fresh_snapshot_ || !RenewSnapshot().ok()) {
      Kill();
      CellOutcome lost;
      lost.session_lost = true;
      lost.result = Result::Failure(Outcome::kWorkerLost, kExitFailure,
                                    "the session's processes were lost before the cell ran");
      return lost;
    }
    sent = SendRun(run, &variables_after);
    if (!sent.ok()) return RunnerDied(run, false, false, {});
    outcome = AwaitResult(run, deadline, on_channel);
  }
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
  // Once the session sends its tool pipes: the eventfd that stops the thread
  // serving them, written when this returns (a tool still running there is
  // abandoned; its reply goes nowhere).
  UniqueFd stop_tool_pipes;
  struct CloseReplies {
    std::shared_ptr<ToolReplies>& replies;
    UniqueFd& stop_tool_pipes;
    ~CloseReplies() {
      if (replies) replies->Close();
      if (stop_tool_pipes) {
        const std::uint64_t one = 1;
        (void)!::write(stop_tool_pipes.get(), &one, sizeof one);
      }
    }
  } close_replies{replies, stop_tool_pipes};
  std::optional<CheckpointData> sent_ahead;  // sync: the cell's checkpoint
  // A cell whose output never pauses for kPollSlice still gets its stop
  // checks: between frames, at most one per kPollSlice.
  Clock::time_point next_stop_check = Clock::now() + kPollSlice;
  for (;;) {
    if (run.should_stop && Clock::now() >= next_stop_check) {
      next_stop_check = Clock::now() + kPollSlice;
      if (run.should_stop()) return RunnerDied(run, false, true, output);
    }
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
    if (!frame.ok() && renewing_in_place_ && frame.status().code() != ErrorCode::kTimeout) {
      return RenewalRefused();
    }
    // It answered: it renewed, and read this RUN. (A snapshot it refreshed
    // while it idled before the renewal it sent first, and then it ends:
    // that snapshot holds the last session's state, never the next one's.)
    if (frame.ok() && frame->tag != Tag::kSnapshotRefreshed) renewing_in_place_ = false;
    if (!frame.ok()) {
      if (frame.status().code() == ErrorCode::kTimeout) return RunnerDied(run, true, false, output);
      return RunnerDied(run, false, false, output);
    }
    if (frame->tag == Tag::kOutput) {
      if (output.size() < kMaxKeptOutput) output.append(frame->payload);
      if (run.live != nullptr) run.live->Text(frame->payload);
      continue;
    }
    if (frame->tag == Tag::kImage) {  // asked for or not, only ever shown
      if (run.live != nullptr) run.live->Image(frame->payload);
      continue;
    }
    if (frame->tag == Tag::kRunner) {
      DOLSOT_RETURN_IF_ERROR(AcceptRunner(*frame));
      continue;
    }
    if (frame->tag == Tag::kSnapshotRefreshed) {  // sent while it idled, before this cell
      DOLSOT_RETURN_IF_ERROR(AdoptRefreshedSnapshot(*frame));
      continue;
    }
    if (frame->tag == Tag::kToolCall) {
      if (!replies) {
        replies = std::make_shared<ToolReplies>(UniqueFd(::fcntl(socket, F_DUPFD_CLOEXEC, 0)));
      }
      if (run.live != nullptr) run.live->Flush();  // what it printed first, first
      DispatchToolCall(run, *frame, replies);
      continue;
    }
    if (frame->tag == Tag::kToolPipes) {
      AcceptToolPipes(run, *frame, &stop_tool_pipes);
      continue;
    }
    if (frame->tag == Tag::kCheckpointData) {
      // Sync checkpoints: the cell's comes ahead of its Result, on its own
      // (its blob is kept where it arrived, not copied out of the Result).
      if (!sync_checkpoints_ || sent_ahead) {
        return CorruptError("a CHECKPOINT_DATA frame while a cell ran, where none may come");
      }
      auto data = ParseCheckpointData(std::move(frame->payload));
      if (!data.ok()) return data.status();
      sent_ahead = std::move(data).value();
      continue;
    }
    if (frame->tag != Tag::kResult) {
      return CorruptError(std::string("unexpected frame ") + protocol::TagName(frame->tag) +
                          " while a cell ran");
    }
    PayloadReader r(frame->payload);
    CellOutcome outcome;
    outcome.result = protocol::ReadResult(r);
    if ((r.U8() != 0) != sent_ahead.has_value()) {
      return CorruptError("a RESULT that disagrees with the CHECKPOINT_DATA ahead of it");
    }
    if (sent_ahead) outcome.checkpoint = std::move(sent_ahead);
    std::vector<std::string> threads = r.Strs();
    outcome.rebound = r.Strs();
    auto runner_pid = static_cast<pid_t>(r.U32());
    std::uint8_t carried = r.U8();
    std::optional<protocol::Bindings> bindings;
    if (carried & protocol::kBindingCell) {
      auto read = protocol::ReadBindings(r);
      if (!read.ok()) return read.status();
      bindings = std::move(read).value();
    }
    DOLSOT_RETURN_IF_ERROR(r.Finish("RESULT"));
    if (!PlausiblePid(runner_pid)) return CorruptError("RESULT without the runner's pid");
    if (!(runner_.process.known() && frame->sender == runner_.process.pid() &&
          runner_pid == runner_.process.namespace_pid())) {
      // A runner the host has not vouched for by this socket's writer yet
      // (a sandboxed one is looked up in /proc once, not per cell).
      auto runner = ProcessIdentity::FromSender(*frame, runner_pid, "RESULT");
      if (!runner.ok()) return runner.status();
      runner_.process = *runner;
    }
    // The descriptors that came with it, in order.
    UniqueFd* next_fd = &frame->fd;
    UniqueFd checkpoint_channel, snapshot_socket;
    if (carried & protocol::kCarriesCheckpointChannel) {
      checkpoint_channel = std::move(*next_fd);
      next_fd = &frame->fd2;
    }
    outcome.read_only = (carried & protocol::kReadOnlyCell) != 0;
    const bool names_unchanged = (carried & protocol::kNamesUnchanged) != 0;
    if (names_unchanged && (!outcome.read_only || !names_reported_ || !outcome.result.held.empty())) {
      return CorruptError("a RESULT said its names were unchanged where it may not");
    }
    // A read-only or binding cell keeps the snapshot: a checkpoint's channel
    // (one the host owed) may come with it, never a snapshot's socket.
    if (outcome.read_only &&
        (carried & ~(protocol::kReadOnlyCell | protocol::kNamesUnchanged |
                     protocol::kCarriesCheckpointChannel)) != 0) {
      return CorruptError("a read-only cell's RESULT carried a snapshot's socket");
    }
    outcome.binding = bindings.has_value();
    if (outcome.binding &&
        ((!snapshots_ && !sync_checkpoints_) ||
         (carried & ~(protocol::kBindingCell | protocol::kCarriesCheckpointChannel)) != 0)) {
      return CorruptError("a binding cell's RESULT carried a snapshot's socket, or came with "
                          "rollback and sync checkpoints off");
    }
    if ((outcome.read_only || outcome.binding) && checkpoint_channel && !run.checkpoint_owed) {
      return CorruptError("a read-only or binding cell's RESULT carried a checkpoint no RUN asked for");
    }
    if (carried & protocol::kCarriesSnapshotSocket) {
      if (!snapshots_) return CorruptError("a snapshot's socket with rollback off");
      snapshot_socket = Attested(std::move(*next_fd));
      if (!snapshot_socket) return CorruptError("the snapshot's socket did not come with RESULT");
    }
    if (checkpoint_channel && on_channel) on_channel(std::move(checkpoint_channel));
    if (names_unchanged) {
      outcome.result.held = held_;
    } else {
      held_ = outcome.result.held;
    }
    names_reported_ = true;
    threads_ = std::move(threads);
    restored_no_cell_ = false;
    if (bindings) {
      // The snapshot stays; what the cell bound is kept for it (the last
      // value of each name), to replay if it is promoted.
      if (snapshots_) pending_bindings_.Merge(*bindings);
      outcome.bindings = std::move(*bindings);
    } else if (snapshots_ && !outcome.read_only) {
      pending_bindings_.Clear();  // the new snapshot holds them
      // The runner forks the snapshot of this state on that socket once we
      // have read this Result, and retires the previous snapshot itself
      // (its child): that socket goes to the caller, to close off the
      // critical path. Without a new socket the runner could not make one:
      // the old snapshot, from before this cell, must never be promoted.
      // (After a read-only cell it may: the state is as it was.)
      outcome.retired_socket = std::move(snapshot_.socket);
      snapshot_.socket = std::move(snapshot_socket);
      fresh_snapshot_ = false;
    }
    return outcome;
  }
}

CellOutcome LiveSession::RunnerDied(const CellRun& run, bool timed_out, bool interrupted,
                                    const std::string& output) {
  // A promoted runner's pid comes in its RUNNER frame, ahead of anything
  // else it sent: read it now if this cell was killed before it was read.
  ReadPendingRunner(Clock::now() + kReapGrace);
  pid_t dead = runner_.process.namespace_pid();  // as the worker knows it
  runner_.process.Kill();
  AdoptRefreshedLeftUnread();
  runner_.socket.Reset();
  runner_.process = ProcessIdentity();
  runner_frame_due_ = false;
  names_reported_ = false;  // a promoted snapshot has not sent its names
  delta_known_ = false;     // nor does it hold what RUN last told the runner
  // Nor, kept, the variables binding cells received (it has their values
  // bound, from the host's copies): every variable is sent again.
  variable_digests_.clear();
  fresh_snapshot_ = false;  // promoted below, or lost with the runner
  recycling_ = false;
  CellOutcome outcome;
  outcome.runner_died = true;
  outcome.interrupted = interrupted;
  Result& r = outcome.result;
  r.ok = false;
  r.stdout_text = CapOutput(output, run.max_output);
  bool rolled_back = false;
  if (snapshots_ && snapshot_.socket) {
    // The snapshot kills what is left of the runner (its parent), waits until
    // it is gone and runs the next cell from the state before this one.
    protocol::PayloadWriter replay;  // what binding cells bound since it forked
    protocol::Bindings kept = pending_bindings_.Take();
    if (!kept.names.empty()) protocol::WriteBindings(replay, kept);
    if (PromoteSnapshot(Tag::kPromote, replay.data()).ok()) {
      rolled_back = true;
      if (!timed_out && !interrupted) {
        // A death we did not cause may have taken the snapshot too (an OOM
        // kill, a kill of the whole group): the Result waits for its RUNNER
        // frame before it says the session was rolled back. A kill of ours
        // does not wait: the next cell learns if the snapshot is gone.
        ReadPendingRunner(Clock::now() + kReapGrace);
        rolled_back = !runner_frame_due_;
      }
    }
  }
  // How it ended, when it ended by itself (a kill of ours says nothing new):
  // the worker reaps the runners (see worker_loop.cc).
  std::string how;
  if (!timed_out && !interrupted && dead > 1) {
    if (auto worker = worker_.lock()) {
      if (std::optional<int> status = worker->ExitStatus(dead)) how = DescribeWaitStatus(*status);
    }
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
  if (!threads_.empty()) {
    std::string names;
    for (const std::string& name : threads_) names += (names.empty() ? "" : ", ") + name;
    after += "; its threads (" + names + ") are gone: recreate them";
    threads_.clear();
  }
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

StatusOr<CheckpointData> LiveSession::Checkpoint(Deadline deadline, const ChannelHandler&) {
  if (!runner_.socket) return Status(ErrorCode::kUnavailable, "the session has no runner");
  DOLSOT_RETURN_IF_ERROR(protocol::WriteFrame(runner_.socket.get(), Tag::kCheckpoint, {}));
  auto frame = ReadFromRunner(deadline);
  if (!frame.ok()) return frame.status();
  if (frame->tag != Tag::kCheckpointData) return CorruptError("expected CHECKPOINT_DATA");
  return ParseCheckpointData(std::move(frame->payload));
}

StatusOr<ProcessChannel> LiveSession::Branch(Deadline deadline, const ChannelHandler&) {
  if (!runner_.socket) return Status(ErrorCode::kUnavailable, "the session has no runner");
  branched_ = true;  // never recycled: the branch shares its keeper
  DOLSOT_RETURN_IF_ERROR(protocol::WriteFrame(runner_.socket.get(), Tag::kBranch, {}));
  auto frame = ReadFromRunner(deadline);
  if (!frame.ok()) return frame.status();
  if (frame->tag != Tag::kBranched) return CorruptError("expected BRANCHED");
  return ChannelFrom(*frame, "BRANCHED", runner_.process);
}

}  // namespace dolsot
