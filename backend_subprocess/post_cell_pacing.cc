// Pacing a session process's post-cell work: wait for the host to read the
// Result, then work under SCHED_BATCH.
#include "backend_subprocess/post_cell_pacing.h"

#include <sched.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <time.h>

#include <chrono>

namespace dolsot {
namespace {

void Nap(long nanoseconds) {
  timespec ts{0, nanoseconds};
  ::nanosleep(&ts, nullptr);
}

}  // namespace

void WaitHostRead(int socket) {
  using std::chrono::steady_clock;
  auto start = steady_clock::now();
  for (;;) {
    int queued = 0;
    if (::ioctl(socket, SIOCOUTQ, &queued) != 0 || queued <= 0) break;
    pollfd p{socket, 0, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL))) return;
    Nap(steady_clock::now() - start < std::chrono::milliseconds(10) ? 50'000 : 1'000'000);
  }
}

Background::Background() : allowed_(::sched_getscheduler(0) == SCHED_OTHER) {}

void Background::Set(bool on) {
  if (!allowed_ || on == on_) return;
  sched_param param{};
  if (::sched_setscheduler(0, on ? SCHED_BATCH : SCHED_OTHER, &param) == 0) on_ = on;
}

}  // namespace dolsot
