// A running `ty server` child: its process group, the private empty
// directory that is its workspace, and the host's end of the socket that is
// its stdin and stdout. Private to typecheck/.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "core/status.h"

namespace dolsot::typecheck {

class TyProcess {
 public:
  // Creates a private directory ($TMPDIR/dolsot-ty-XXXXXX, mode 0700, left
  // empty) and spawns `ty server` (`ty`: an absolute path) in a new process
  // group: stdin and stdout one end of a socketpair, stderr /dev/null, every
  // signal at its default disposition and unblocked, the host's environment
  // with XDG_CONFIG_HOME set to the workspace (so no user-level ty.toml
  // applies).
  static StatusOr<std::unique_ptr<TyProcess>> Spawn(const std::string& ty);

  // Kills the process group with SIGKILL, reaps the child, closes the
  // channel (unless taken) and removes the workspace. A disowned process is
  // left alone.
  ~TyProcess();
  TyProcess(const TyProcess&) = delete;
  TyProcess& operator=(const TyProcess&) = delete;

  // The host's end of the socket; the caller owns it from then on (-1 once
  // taken).
  int TakeChannel();
  // Forgets the child and the workspace without touching them, and closes
  // this copy of the channel: in a forked copy of the host they are the
  // creator's, and the copy must not keep ty's stdin open.
  void Disown();

  // Absolute, without a trailing slash.
  const std::string& workspace() const { return workspace_; }

 private:
  TyProcess(std::string workspace, pid_t pid, int channel)
      : workspace_(std::move(workspace)), pid_(pid), channel_(channel) {}

  std::string workspace_;  // "" when disowned
  pid_t pid_;              // -1 when disowned
  int channel_;
};

// The absolute path of the executable `bin`, or an error saying ty is
// missing. A bare name is looked up beside `python_executable` (the
// interpreter the type gate resolves imports against: its environment's
// scripts directory, where pip installs ty), then on PATH.
StatusOr<std::string> ResolveTyBinary(const std::string& bin,
                                      const std::string& python_executable = "");

}  // namespace dolsot::typecheck
