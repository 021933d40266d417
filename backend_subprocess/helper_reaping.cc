// A session process's idle wait, reaping its helpers (see helper_reaping.h).
#include "backend_subprocess/helper_reaping.h"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "core/unique_fd.h"

namespace dolsot {

void ReapExitedHelpers(std::vector<pid_t>* helpers) {
  for (auto it = helpers->begin(); it != helpers->end();) {
    if (::waitpid(*it, nullptr, WNOHANG) != 0) {
      it = helpers->erase(it);  // reaped, or not ours to wait for (ECHILD)
    } else {
      ++it;
    }
  }
}

void AwaitReadableReaping(int socket, std::vector<pid_t>* helpers) {
  for (;;) {
    ReapExitedHelpers(helpers);
    if (helpers->empty()) return;
    std::vector<UniqueFd> watched;
    std::vector<pollfd> wait{{socket, POLLIN, 0}};
    for (pid_t pid : *helpers) {
      UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
      if (!pidfd) continue;
      wait.push_back({pidfd.get(), POLLIN, 0});
      watched.push_back(std::move(pidfd));
    }
    if (watched.empty()) return;  // no pidfds: the next cell reaps them
    int ready;
    do {
      ready = ::poll(wait.data(), wait.size(), -1);
    } while (ready < 0 && errno == EINTR);
    if (ready < 0 || wait[0].revents != 0) return;
  }
}

}  // namespace dolsot
