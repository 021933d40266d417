// SIGPIPE blocked on one thread while it writes to pipes (see pipe_signal.h).
#include "core/pipe_signal.h"

#include <pthread.h>
#include <signal.h>

namespace dolsot {
namespace {

thread_local bool pipe_signal_blocked = false;  // by a ScopedPipeSignalBlock

sigset_t PipeSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

// Takes back a SIGPIPE raised on this thread while it was blocked.
void TakeBackPipeSignal() {
  const sigset_t set = PipeSignal();
  const timespec now{0, 0};
  while (::sigtimedwait(&set, nullptr, &now) == SIGPIPE) {
  }
}

}  // namespace

bool PipeSignalIgnored() {
  struct sigaction now {};
  return ::sigaction(SIGPIPE, nullptr, &now) == 0 && !(now.sa_flags & SA_SIGINFO) &&
         now.sa_handler == SIG_IGN;
}

ScopedPipeSignalBlock::ScopedPipeSignalBlock() : was_active_(pipe_signal_blocked) {
  if (was_active_) return;
  const sigset_t set = PipeSignal();
  sigset_t before;
  if (::pthread_sigmask(SIG_BLOCK, &set, &before) != 0) return;
  blocked_ = !sigismember(&before, SIGPIPE);
  pipe_signal_blocked = true;
}

ScopedPipeSignalBlock::~ScopedPipeSignalBlock() {
  if (was_active_) return;
  pipe_signal_blocked = false;
  if (!blocked_) return;
  TakeBackPipeSignal();
  const sigset_t set = PipeSignal();
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

bool ScopedPipeSignalBlock::Active() { return pipe_signal_blocked; }

}  // namespace dolsot
