// LiveCell: what one Repl cell needs to stream its output to the caller
// (RunOptions::live): the LiveOutputStream its OUTPUT and IMAGE frames go
// to, and the cell's tools without tool pipes, so its tool calls come on the
// runner's socket in order with its output.
#pragma once

#include <cstddef>
#include <memory>

#include "backend_subprocess/live_session.h"
#include "core/backend.h"
#include "core/live_output_stream.h"

namespace dolsot {

class LiveCell {
 public:
  // Sets run.live (and run.tools, when the cell's tools would use pipes)
  // when `options` carry callbacks; else leaves `run` as it is. `run` and
  // `options` must outlive this object.
  LiveCell(const RunOptions& options, std::size_t max_output, CellRun& run);
  ~LiveCell() { Finish(); }
  LiveCell(const LiveCell&) = delete;
  LiveCell& operator=(const LiveCell&) = delete;

  // Delivers what is left and stops the callbacks (LiveOutputStream::Finish).
  void Finish() {
    if (stream_ != nullptr) stream_->Finish();
  }

 private:
  std::unique_ptr<LiveOutputStream> stream_;
  // The caller's tools, less serve_pipes: a call made through a pipe would
  // reach the host on another thread, ahead of output the socket still holds.
  CellTools socket_tools_;
};

}  // namespace dolsot
