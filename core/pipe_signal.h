// SIGPIPE on a thread that writes to pipes: a reader that is gone must be an
// error value (EPIPE), never a signal that kills a host whose code did not
// ignore it. The worker protocol's pipe writes and a host's tool-serving
// thread both use it.
#pragma once

namespace dolsot {

// Whether the process ignores SIGPIPE now (a Python process does, unless
// its code said otherwise).
bool PipeSignalIgnored();
// Blocks SIGPIPE on the calling thread while it lives, for a thread that
// writes to pipes many times (WritePipeFrame then blocks nothing itself); a
// SIGPIPE raised meanwhile is taken back before the mask is restored.
class ScopedPipeSignalBlock {
 public:
  ScopedPipeSignalBlock();
  ~ScopedPipeSignalBlock();
  ScopedPipeSignalBlock(const ScopedPipeSignalBlock&) = delete;
  ScopedPipeSignalBlock& operator=(const ScopedPipeSignalBlock&) = delete;
  static bool Active();  // on the calling thread

 private:
  bool blocked_ = false;     // this one blocked it (it was not blocked before)
  bool was_active_ = false;  // an outer one was
};


}  // namespace dolsot
