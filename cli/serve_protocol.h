// The dolsot server's wire protocol (docs/cli.md, "The server"): frames of a
// 4-byte big-endian length and a JSON object carrying the protocol version.
// Byte strings that need not be UTF-8 (code, argv words, the environment,
// the cwd, what a command printed) travel base64-encoded. Frame sizes are
// bounded both ways; a bad frame is an error value, never a crash.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/run_command.h"
#include "core/status.h"
#include "sandbox/sandbox_policy.h"

namespace dolsot::cli {

// 2: a run carries the caller's resolved Sandbox policy ("sandbox"). A
// server of version 1 would ignore it and run the cell unwalled, so the
// version changed: such a server refuses the request instead.
// 3: a run's stdout comes as it is written, in "chunk" replies ahead of its
// "output" reply (which then holds the rest).
// 4: a run may ask for JSON lines ("json_lines", --json-lines), and the
// "names" request reads a session's names without running a cell in it
// (--names). A server of version 3 would answer --json-lines with one
// document and refuse "names" as an unknown type: it is replaced instead.
inline constexpr int kServeProtocolVersion = 4;
// The code of the error a frame of another protocol version decodes to: a
// server of another dolsot release (an upgrade left the old one running).
// The client stops such a server and starts its own (serve_client.cc).
inline constexpr ErrorCode kOtherProtocolVersion = ErrorCode::kUnimplemented;
// A request carries at most a 1 MiB cell (base64: 4/3 of it), an environment
// and a few words: 16 MiB is ample.
inline constexpr std::size_t kMaxRequestFrame = std::size_t{16} << 20;
// A response carries what the command printed (stdout is capped by
// DOLSOT_MAX_OUTPUT unless that is 0): 512 MiB.
inline constexpr std::size_t kMaxResponseFrame = std::size_t{512} << 20;

enum class RequestType { kRun, kList, kReset, kRelease, kInterrupt, kStatus, kStop, kNames };

// What a CLI call asks of the server.
struct ServeRequest {
  RequestType type = RequestType::kRun;
  bool json = false;
  std::string cwd;               // the calling CLI's working directory
  std::vector<std::string> env;  // its environment, "NAME=value"
  RunArgs run;                   // kRun: run.code is always set, run.sandbox resolved
  std::string target;            // kReset / kRelease: a session id or "all"; kNames: a session id
};

// What the server answers.
enum class ReplyType { kOutput, kStatus, kOk, kError, kChunk };

struct ServeStatus {
  long long pid = 0;
  std::string socket;
  std::string cache_dir;
  double uptime_seconds = 0;
  std::vector<std::string> live_sessions;
  int profiles = 0;
};

struct ServeReply {
  ReplyType type = ReplyType::kOutput;
  std::string out;  // kOutput: the command's stdout bytes (kChunk: some of them, as they come)
  std::string err;  // kOutput: its stderr bytes
  int exit_code = 0;
  std::string message;  // kError
  ServeStatus status;   // kStatus
};

std::string RequestTypeName(RequestType type);

// The canonical text of a Sandbox policy ("null" for none): every field of
// SandboxPolicy, mounts in their order, paths byte for byte (base64). Equal
// policies give equal texts, different ones different texts; a request
// carries it and the profile key (serve_profile.h) holds it.
std::string EncodeSandboxPolicy(const std::optional<SandboxPolicy>& policy);
// Its inverse, validated (ValidateSandboxPolicy): kInvalidArgument naming
// what is wrong.
StatusOr<std::optional<SandboxPolicy>> DecodeSandboxPolicy(std::string_view text);

std::string EncodeRequest(const ServeRequest& request);
// kInvalidArgument naming what is wrong (not JSON, a missing or mistyped
// field, bad base64); kOtherProtocolVersion for another protocol version.
StatusOr<ServeRequest> DecodeRequest(std::string_view frame);
std::string EncodeReply(const ServeReply& reply);
// Errors as DecodeRequest's.
StatusOr<ServeReply> DecodeReply(std::string_view frame);

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// Writes one frame (length, payload); MSG_NOSIGNAL, so a peer that is gone
// is kUnavailable, not SIGPIPE. kInvalidArgument when it exceeds `limit`.
Status WriteFrame(int fd, std::string_view payload, std::size_t limit);
// Reads one frame of at most `limit` bytes. kUnavailable "closed" on EOF
// before its first byte; kCorrupt on EOF inside it or a length over the
// limit; kTimeout when `deadline` passes. `wait` (optional) is called each
// time the wait is interrupted by a signal or ~100 ms pass with nothing to
// read; returning a Status that is not OK ends the read with it.
StatusOr<std::string> ReadFrame(int fd, std::size_t limit, Deadline deadline,
                                const std::function<Status()>& wait = nullptr);

}  // namespace dolsot::cli
