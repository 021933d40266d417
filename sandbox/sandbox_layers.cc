// The layers' shared reporting and file helpers (see sandbox_layers.h).
#include "sandbox/sandbox_layers.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/unique_fd.h"

namespace dolsot::sandbox_layers {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

Status Missing(const SandboxPolicy& policy, SandboxReport* report, const std::string& layer,
               const std::string& why, const std::string& how) {
  if (!policy.best_effort) {
    return Status(ErrorCode::kUnavailable, "sandbox: the " + layer + " layer cannot be applied (" +
                                               why + "); " + how +
                                               ", or pass Sandbox(best_effort=True) to run with "
                                               "fewer layers");
  }
  report->layers.push_back({layer, false, why + "; " + how});
  return Status::Ok();
}

void Active(SandboxReport* report, const std::string& layer, const std::string& detail) {
  report->layers.push_back({layer, true, detail});
}

Status WriteFile(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return Status(ErrorCode::kUnavailable, Errno("open " + path));
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return Status(ErrorCode::kUnavailable, Errno("write " + path));
  }
  return Status::Ok();
}

}  // namespace dolsot::sandbox_layers
