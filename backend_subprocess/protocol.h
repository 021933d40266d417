// The host <-> worker <-> session wire protocol: framed binary messages
// {u32 tag, u32 length} + payload, little endian, over AF_UNIX stream sockets,
// optionally carrying one or two file descriptors (SCM_RIGHTS). The first frame on a
// worker channel is kHello with kProtocolVersion. A message longer than one
// frame may hold travels as kContinued frames followed by its own.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend_subprocess/checkpoint_metadata.h"
#include "core/cell_inputs.h"
#include "core/pipe_signal.h"
#include "core/result.h"
#include "core/status.h"
#include "core/unique_fd.h"

namespace dolsot::protocol {

// 3: the session names its cells (RUN carries no filename).
// 4: frames are capped at kMaxFrameBytes; longer messages go in parts.
// 5: IMPORTING frames before HELLO_OK name the toolbox being imported.
// 6: RUN carries tools and variables; TOOL_CALL/TOOL_REPLY; RESULT carries
//    error_type and the returned value.
// 7: the runner runs every cell and forks snapshots (PROMOTE, RUNNER as the
//    hello of a process that starts serving cells); RESULT lists the live
//    threads and the names bound anew, and carries the cell's images (PNG
//    bytes); HELLO carries max_repr; EXIT_STATUS asks the worker how a
//    session process ended.
// 8: HELLO carries a Sandbox.
// 9: TOOL_SOCKET (a cell's own socket for tool calls; RUN says whether the
//    host serves one); TOOL_CALL and TOOL_REPLY end with the sender's clock.
// 10: RUN ends with a byte of flags (kRunCheckpointOwed); RESULT's last byte
//    may say kReadOnlyCell (no checkpoint follows; the snapshot stays).
// 11: RESULT may say kBindingCell and then carries the cell's bindings;
//    PROMOTE carries the bindings a snapshot replays.
// 12: TOOL_PIPES replaces TOOL_SOCKET: a cell's own tool calls go over two
//    pipes (the frame carries the host's ends: the call pipe's read end and
//    the reply pipe's write end).
// 13: RUN may say kRunHostHasNames; a read-only cell's RESULT may then say
//    kNamesUnchanged and list no held names.
// 14: MESSAGE_SIZE announces a message of several frames; CHECKPOINT_DATA
//    carries its blob first and the blob's size last; a sync checkpoint
//    comes as CHECKPOINT_DATA ahead of its cell's RESULT.
// 15: RUN may carry the digests of the base the store holds (kRunDeltaBase)
//    or say there is none (kRunNoDeltaBase); CHECKPOINT_DATA says whether it
//    is a delta checkpoint against such a base, and which names it kept.
// 16: RUN may say kRunLiveOutput (a batch of OUTPUT never waits for the
//    cell's next write) and kRunLiveImages (IMAGE frames as figures are shown).
// 17: SNAPSHOT_REFRESHED (an idle runner's new snapshot).
// 18: a read-only or binding cell's RESULT may carry a checkpoint channel
//    (kRunCheckpointOwed, async): the checkpoint is written, the snapshot
//    stays; kRunSnapshotOwed asks for the general path. RENEW promotes a
//    snapshot that holds a new session, for a new session.
// 19: RENEW_IN_PLACE makes a runner whose snapshot holds a new session, and
//    whose cells since were all proven, a new session itself (no answer;
//    it exits, reading nothing more, when it cannot).
inline constexpr std::uint32_t kProtocolVersion = 19;

// The largest frame either end sends or accepts: 16 MiB. The peer of a host
// is a process running the user's code, so a frame's claimed length is
// never trusted beyond this: a reader allocates at most this much before the
// bytes arrive, and a header claiming more is kCorrupt at once.
//
// Why 16 MiB: every message whose size is bounded at its source fits with
// room to spare (a Result with the default max_output of 100000 characters
// is under half a MiB with its traceback and names; HELLO, READY, OPENED,
// RUNNER, DIED and the rest are bytes to kilobytes; the CLI caps a cell at
// 1 MiB). What is unbounded (a checkpoint blob, hundreds of MB in LOAD,
// CHECKPOINT_DATA or a sync Result; a Result with max_output=0, "no cap";
// the library's cell code) is sent by WriteFrame as kContinued frames of
// this size followed by the message's own frame with the rest, and
// ReadFrame joins them as they arrive: the host holds what was actually
// sent, never what was claimed. At this size a part's header and syscall are
// noise next to copying its bytes, and a stalled claim costs little memory.
// Such a message is announced by a kMessageSize frame: the reader reserves
// address space for it once (advised for transparent huge pages) and reads
// every part straight into it, instead of joining parts into a copy (at
// 100 MB each copy into fresh memory is ~25,600 page faults). Only what
// arrives is touched, so a claim that is never kept costs no memory either.
inline constexpr std::uint32_t kMaxFrameBytes = 16u << 20;
// The largest message (all its frames together); payload strings carry u32
// lengths. A bigger checkpoint fails cleanly.
inline constexpr std::uint64_t kMaxMessageBytes = 0x7fffffffu;

enum class Tag : std::uint32_t {
  // host -> worker (the fork server)
  kHello = 1,     // version, toolboxes, sys.path, cwd
  kOpen = 2,      // fork a fresh session process (reply kOpened + fd)
  kShutdown = 3,  // kill every session process and exit
  // worker -> host
  kHelloOk = 4,     // worker pid
  kHelloError = 5,  // a toolbox failed to import: message
  kOpened = 6,      // pid of the new session process; carries the host's fd
  kImporting = 7,   // before HELLO_OK: the toolbox it imports now (alias, module),
                    // so a toolbox that kills the worker is named
  kExitStatus = 8,       // host -> worker: {pid} of a session process that died
  kExitStatusReply = 9,  // worker -> host: {found u8, wait status i32}
  // host -> session process
  kLoad = 10,        // checkpoint blob (maybe empty) to restore, then get ready
  kRun = 11,         // one cell
  kRetire = 12,      // exit
  kPromote = 13,     // to a snapshot: the runner is gone; make sure, then run cells
  kBranch = 14,      // fork a copy of this state as a new session
  kCheckpoint = 15,  // serialize now and reply kCheckpointData
  kToolReply = 16,   // while a cell runs: {call id, ok, pickled value or error, sent at}
  kRenew = 17,       // to a snapshot that holds a new session (LiveSession::Recycle): its
                     // runner was killed with its session; run a new one's cells
  kRenewInPlace = 18,  // to a runner whose snapshot holds a new session and whose cells
                       // since were all proven: become a new session (no answer), or exit
  // session process -> host
  kReady = 20,            // after kLoad: restored and failed names
  kOutput = 21,           // a chunk of stdout, as the cell writes it
  kImage = 24,            // after RUN's kRunLiveImages: a figure's PNG bytes, as shown
  kResult = 22,           // the cell's Result (+ live threads; a sync checkpoint comes just
                          // ahead, as CHECKPOINT_DATA); may carry the async checkpoint's
                          // channel and the next snapshot's socket
  kRunner = 23,           // first frame of a process that starts running cells (restored,
                          // branched, promoted): its pid; rollback on, carries the socket
                          // of its first snapshot
  kBranched = 26,         // pid of the branch; carries its fd
  kCheckpointData = 27,   // blob, saved, dropped, blob size (ParseCheckpointData)
  kToolCall = 28,         // while a cell runs: {call id, tool name, pickled (args, kwargs),
                          // sent at}
  kToolPipes = 29,        // while a cell runs: carries the host's ends of the cell's own
                          // pipes for tool calls, the call pipe's read end then the reply
                          // pipe's write end (tool_pipes.h)
  kSnapshotRefreshed = 32,  // between cells, unasked: carries the socket of a new snapshot of
                            // the runner's state (the old one is retired once it is sent)
  // any direction
  kContinued = 30,  // the next kMaxFrameBytes of a longer message, whose own
                    // frame (with the rest) follows
  kMessageSize = 31,  // ahead of a longer message's frames: {u64 its payload bytes}
};

// A kResult payload ends with a byte saying which descriptors the frame
// carries, in this order.
inline constexpr std::uint8_t kCarriesCheckpointChannel = 1;
inline constexpr std::uint8_t kCarriesSnapshotSocket = 2;
// Not a descriptor: the cell was proven read-only (embedded/read_only_cell.h)
// and completed, so the session is as the snapshot from before it (which
// stays the rollback point) and as its last checkpoint (none follows unless
// RUN said kRunCheckpointOwed: then its channel or CHECKPOINT_DATA comes
// with it, and still no snapshot).
inline constexpr std::uint8_t kReadOnlyCell = 4;
// Not a descriptor: a binding cell (embedded/read_only_cell.h) that
// completed and changed only the names it bound, to plain values: the
// snapshot from before it stays, the host keeps those values (Bindings,
// after the byte) and hands them to the snapshot when it promotes it, and
// no checkpoint follows yet (the host asks for one: RUN's
// kRunCheckpointOwed, which a later read-only or binding cell answers with
// a checkpoint and no new snapshot).
inline constexpr std::uint8_t kBindingCell = 8;
// Not a descriptor, only with kReadOnlyCell and only after a RUN that said
// kRunHostHasNames: the Result's held names are left out (an empty list):
// they are the host's list, which the cell could not change.
inline constexpr std::uint8_t kNamesUnchanged = 16;

// What binding cells bound since the snapshot: the session's cell count
// after the last of them (so a promoted snapshot numbers on from there),
// and each name's marshalled value, the last one bound. Written after
// RESULT's flags byte (kBindingCell) and as PROMOTE's payload (empty: none).
struct Bindings {
  std::uint64_t cells_run = 0;
  std::vector<std::string> names;
  std::vector<std::string> values;  // marshal format
};

// RUN's last byte: the host has no durable checkpoint of the session's
// current state (none yet, the last save failed, or it is old): the cell
// gets a checkpoint even when it is read-only (a read-only or binding cell
// keeps its snapshot all the same).
inline constexpr std::uint8_t kRunCheckpointOwed = 1;
// RUN's last byte: the host's list of the session's held names is the one the
// session process sent in its last Result (none came since from anywhere
// else: a restore, a promoted snapshot, a branch), so a read-only cell may
// leave it out (kNamesUnchanged). A session with thousands of names saves
// listing, sending and reading them for every such cell.
inline constexpr std::uint8_t kRunHostHasNames = 2;
// RUN's last byte, then BaseDigests after it: the base the store holds and
// its values' digests. The session's checkpoints from then on may be deltas
// against it (checkpoint_journal.h), until kRunNoDeltaBase or another base.
inline constexpr std::uint8_t kRunDeltaBase = 4;
// RUN's last byte: the session's checkpoints are whole from now on (the
// store holds no base a delta could extend).
inline constexpr std::uint8_t kRunNoDeltaBase = 8;
// RUN's last byte: the host streams this cell's output to a caller
// (RunOptions::live): a batch of OUTPUT past the first 64 KiB goes out within
// about 10 ms even when the cell writes nothing more, and what waits goes out
// ahead of the cell's TOOL_CALL and IMAGE frames (socket_sink.h).
inline constexpr std::uint8_t kRunLiveOutput = 16;
// RUN's last byte: the caller wants figures as they are shown: an IMAGE
// frame for each, in order with OUTPUT (the Result still carries them).
inline constexpr std::uint8_t kRunLiveImages = 32;
// RUN's last byte: the host lets go of what binding cells bound since the
// snapshot (too much kept): the cell takes the general path, so a new
// snapshot holds it (and a checkpoint follows).
inline constexpr std::uint8_t kRunSnapshotOwed = 64;
struct Frame {
  Tag tag{};
  std::string payload;
  UniqueFd fd;   // the first descriptor passed with the frame, if any
  UniqueFd fd2;  // the second
  // The process that wrote every byte of the message, as the kernel attests
  // it (SCM_CREDENTIALS), on a socket that asks (AttestSenders); 0 when it
  // does not ask, or when more than one process wrote the message.
  pid_t sender = 0;
};

using Clock = std::chrono::steady_clock;
// A point in time after which a read gives up with kTimeout; nullopt = never.
using Deadline = std::optional<Clock::time_point>;

// Sends one message (and `pass_fd` when >= 0) in full, retrying on EINTR and
// short writes: one frame, or kContinued frames and then one under `tag`
// when the payload is over kMaxFrameBytes. kUnavailable when the peer is
// gone, kInvalidArgument over kMaxMessageBytes. Descriptors < 0 are not
// passed; pass_fd2 only with pass_fd.
Status WriteFrame(int fd, Tag tag, std::string_view payload, int pass_fd = -1,
                  int pass_fd2 = -1);

// WriteFrame of the concatenation of `parts`, which are not copied (one
// writev per frame; no descriptors): for a large message built of pieces.
Status WriteFrameParts(int fd, Tag tag, const std::vector<std::string_view>& parts);

// Reads one whole message (its kContinued frames joined; `tag` is its own).
// kUnavailable on EOF before the first byte (peer gone); kCorrupt on EOF
// mid-message or a frame claiming more than kMaxFrameBytes (refused before
// anything is allocated for it); kTimeout when `deadline` passes first.
// Received descriptors are close-on-exec. kIo (DescriptorsDropped) when
// descriptors came with the message but this process could take none of
// them (out of file descriptors): the message was read whole, so the stream
// is still in step.
StatusOr<Frame> ReadFrame(int fd, Deadline deadline = std::nullopt);

// How ReadFrame's error for descriptors it could not take begins.
inline constexpr std::string_view kDescriptorsDropped =
    "descriptors sent with a frame were dropped";
// Whether `status` is that error.
bool DescriptorsDropped(const Status& status);

// WriteFrame for a pipe (no descriptors): write(). A reader that is gone is
// kUnavailable, never a signal: SIGPIPE is blocked on the calling thread
// meanwhile (two system calls) unless the process ignores it (`ignored`, as
// PipeSignalIgnored() said) or a ScopedPipeSignalBlock of this thread blocks
// it. On a non-blocking pipe that is full it waits until the pipe takes
// more or `stop_fd` (an eventfd; < 0: none) is readable, which ends it with
// kUnavailable (the frame may be partly written).
Status WritePipeFrame(int fd, Tag tag, std::string_view payload, int stop_fd = -1,
                      bool ignored = false);
// ReadFrame for a stream that carries no descriptors and attests no sender
// (a cell's tool pipes): a small frame's header and payload come with one
// read, where ReadFrame makes two. Bytes read past a message are kept for
// the next Read, so poll() cannot tell that one is there: look at pending()
// first.
class BufferedFrameReader {
 public:
  // As ReadFrame without a deadline. On a non-blocking `fd` it waits for the
  // rest of a frame until `stop_fd` (an eventfd; < 0: none) is readable,
  // which ends it with kUnavailable.
  StatusOr<Frame> Read(int fd, int stop_fd = -1);
  bool pending() const { return start_ < end_; }

 private:
  static constexpr std::size_t kChunk = 4096;
  // Up to `n` bytes (short only at EOF).
  StatusOr<std::size_t> Take(int fd, char* to, std::size_t n, int stop_fd);
  std::unique_ptr<char[]> buffer_;  // kChunk bytes once a short read needed it
  std::size_t start_ = 0;
  std::size_t end_ = 0;  // buffer_[start_, end_) is read and not yet taken
};

// Waits until `fd` is readable (or hung up). kTimeout when `deadline` passes.
Status WaitReadable(int fd, Deadline deadline);

// Whether `fd` is readable (or hung up) right now, without waiting.
bool Readable(int fd);

// The tag of the frame waiting on the socket `fd`, peeked (nothing is
// read); nullopt when no whole tag is there yet, or the peer hung up.
std::optional<Tag> PeekTag(int fd);

// Makes the kernel attest the writer of everything read from `socket` from
// now on (SO_PASSCRED): Frame::sender. Bytes queued before the call carry
// no attestation.
Status AttestSenders(int socket);

// A connected AF_UNIX stream socket pair, both ends close-on-exec.
StatusOr<std::pair<UniqueFd, UniqueFd>> SocketPair();

// Builds a payload: integers little endian, strings as u32 length + bytes.
class PayloadWriter {
 public:
  PayloadWriter& U8(std::uint8_t v);
  PayloadWriter& U32(std::uint32_t v);
  PayloadWriter& I32(std::int32_t v) { return U32(static_cast<std::uint32_t>(v)); }
  PayloadWriter& U64(std::uint64_t v);
  PayloadWriter& F64(double v);
  PayloadWriter& Str(std::string_view s);
  PayloadWriter& Strs(const std::vector<std::string>& list);
  PayloadWriter& OptStr(const std::optional<std::string>& s);
  const std::string& data() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads a payload written by PayloadWriter; every read is bounds-checked and
// the first failure sticks (status() is kCorrupt, naming what was read).
class PayloadReader {
 public:
  explicit PayloadReader(std::string_view data) : data_(data) {}
  std::uint8_t U8();
  std::uint32_t U32();
  std::int32_t I32() { return static_cast<std::int32_t>(U32()); }
  std::uint64_t U64();
  double F64();
  std::string Str();
  std::string_view StrView();  // valid while the payload lives
  std::vector<std::string> Strs();
  std::optional<std::string> OptStr();
  // OK when every read succeeded and the payload was consumed exactly.
  Status Finish(const char* what) const;
  // Whether a read failed (it sticks).
  bool failed() const { return failed_; }

 private:
  bool Take(std::size_t n, const char** at);
  std::string_view data_;
  std::size_t pos_ = 0;
  bool failed_ = false;
};

// Result <-> payload (used in kResult).
void WriteResult(PayloadWriter& w, const Result& r);
Result ReadResult(PayloadReader& r);

// Bindings <-> payload (kResult after kBindingCell; kPromote). Reading
// checks a value for every name and no empty name.
void WriteBindings(PayloadWriter& w, const Bindings& bindings);
StatusOr<Bindings> ReadBindings(PayloadReader& r);

// BaseDigests <-> payload (RUN after kRunDeltaBase). Reading checks every
// name (not empty, no NUL).
void WriteBaseDigests(PayloadWriter& w, const BaseDigests& digests);
StatusOr<BaseDigests> ReadBaseDigests(PayloadReader& r);


// TOOL_CALL {call id, tool name, pickled (args, kwargs), the sender's
// SpinNowNanos()} and TOOL_REPLY {call id, ok, pickled value or error, the
// sender's SpinNowNanos()}: the stamps teach the waiting end how long to spin
// (core/spin_wait.h).
std::string ToolCallPayload(std::uint64_t id, std::string_view name, std::string_view arguments);
std::string ToolReplyPayload(std::uint64_t id, const ToolReply& reply);
// A call without arguments carries kNoArgumentsPickle, a reply of None
// kNonePickle (core/cell_inputs.h).
struct ToolCallMessage {
  std::uint64_t id = 0;
  ToolCall call;  // session_id left empty
  std::int64_t sent_at = 0;
};
struct ToolReplyMessage {
  std::uint64_t id = 0;
  ToolReply reply;
  std::int64_t sent_at = 0;
};
// kCorrupt for a payload that is not one.
StatusOr<ToolCallMessage> ReadToolCall(std::string_view payload);
StatusOr<ToolReplyMessage> ReadToolReply(std::string_view payload);

const char* TagName(Tag tag);

}  // namespace dolsot::protocol
