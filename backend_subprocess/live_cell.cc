// LiveCell (see live_cell.h).
#include "backend_subprocess/live_cell.h"

namespace dolsot {

LiveCell::LiveCell(const RunOptions& options, std::size_t max_output, CellRun& run) {
  if (options.live.empty()) return;
  stream_ = std::make_unique<LiveOutputStream>(options.live, max_output);
  run.live = stream_.get();
  if (run.tools != nullptr && run.tools->serve_pipes) {
    socket_tools_ = *run.tools;
    socket_tools_.serve_pipes = nullptr;
    run.tools = &socket_tools_;
  }
}

}  // namespace dolsot
