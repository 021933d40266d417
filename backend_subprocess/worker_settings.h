// WorkerSettings: what the host tells a worker in its kHello frame (toolboxes,
// sys.path, rollback and checkpoint modes, the repr's bound), and its wire
// encoding; and the environment variables that hand a worker its channel.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend_subprocess/checkpoint_mode.h"
#include "core/config.h"
#include "core/status.h"
#include "sandbox/sandbox_policy.h"

namespace dolsot {

// The environment variable naming the inherited socket fd of the host channel.
inline constexpr char kWorkerFdVariable[] = "DOLSOT_WORKER_FD";
// The environment variable naming the inherited fd of the host's stderr. The
// worker's fd 2 is a start-up capture the host reads if the worker dies
// before its handshake; RunWorker moves onto this fd before it answers.
inline constexpr char kWorkerStderrFdVariable[] = "DOLSOT_WORKER_STDERR_FD";

struct WorkerSettings {
  std::map<std::string, std::string> toolboxes;  // alias -> module name
  // The worker's sys.path; empty keeps the worker interpreter's own. Either
  // way the host's cwd is put first (like `python -c`).
  std::vector<std::string> python_path;
  std::string cwd;
  bool snapshots = true;
  CheckpointMode checkpoint = CheckpointMode::kAsync;
  std::size_t max_repr = kDefaultMaxRepr;  // a value's repr (CellRequest::max_repr)
  // The worker walls itself in before it answers (sandbox/sandbox_setup.h).
  std::optional<SandboxPolicy> sandbox;
  // Host paths the sandbox must hide even inside a bound path: the store's
  // cache directory, the host's cwd.
  std::vector<std::string> sandbox_hidden;

  std::vector<std::string> Aliases() const;
};

// The kHello payload (protocol version first).
std::string EncodeHello(const WorkerSettings& settings);
// kCorrupt for a malformed payload, kUnavailable for a version mismatch.
StatusOr<WorkerSettings> DecodeHello(std::string_view payload);

}  // namespace dolsot
