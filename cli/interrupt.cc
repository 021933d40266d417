// Signal handling for the CLI: only async-signal-safe work in the handler.
#include "cli/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

namespace dolsot::cli {
namespace {

std::atomic<bool> g_cell_running{false};
std::atomic<bool> g_interrupt_requested{false};

static_assert(std::atomic<bool>::is_always_lock_free, "needed in a signal handler");

void OnInterrupt(int signal_number) {
  if (g_cell_running.load() && !g_interrupt_requested.exchange(true)) return;
  ::_exit(128 + signal_number);
}

}  // namespace

void InstallInterruptHandlers() {
  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

bool InterruptRequested() { return g_interrupt_requested.load(); }

CellInProgress::CellInProgress() { g_cell_running.store(true); }

CellInProgress::~CellInProgress() {
  g_cell_running.store(false);
  // A signal that arrived while the cell was being stopped has done its
  // work; one arriving from now on exits the process.
}

}  // namespace dolsot::cli
