// WorkerSettings: what the host tells a worker in its kHello frame (toolboxes,
// sys.path, rollback and checkpoint modes, the repr's bound), and its wire
// encoding.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backend_subprocess/repl.h"
#include "core/status.h"

namespace dolsot {

struct WorkerSettings {
  std::map<std::string, std::string> toolboxes;  // alias -> module name
  // The worker's sys.path; empty keeps the worker interpreter's own. Either
  // way the host's cwd is put first (like `python -c`).
  std::vector<std::string> python_path;
  std::string cwd;
  bool snapshots = true;
  CheckpointMode checkpoint = CheckpointMode::kAsync;
  std::size_t max_repr = kDefaultMaxRepr;  // a value's repr (CellRequest::max_repr)

  std::vector<std::string> Aliases() const;
};

// The kHello payload (protocol version first).
std::string EncodeHello(const WorkerSettings& settings);
// kCorrupt for a malformed payload, kUnavailable for a version mismatch.
StatusOr<WorkerSettings> DecodeHello(std::string_view payload);

}  // namespace dolsot
