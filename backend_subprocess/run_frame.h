// RunFrame: a RUN frame's payload (protocol.h's kRun), decoded in the
// session process: the cell, its tools and variables, the host's flags.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "backend_subprocess/checkpoint_metadata.h"
#include "backend_subprocess/host_variables.h"
#include "core/cell_inputs.h"
#include "core/status.h"

namespace dolsot {

struct RunFrame {
  std::size_t max_output = 0;
  std::string_view code;  // views the payload
  CellTools tools;
  bool tool_pipes = false;  // the host serves tool pipes of the cell's own
  std::vector<ReceivedVariable> variables;
  bool checkpoint_owed = false;  // kRunCheckpointOwed
  bool snapshot_owed = false;    // kRunSnapshotOwed
  bool host_has_names = false;   // kRunHostHasNames
  bool live_output = false;      // kRunLiveOutput
  bool live_images = false;      // kRunLiveImages
  // kRunDeltaBase: the base checkpoints after this cell may be deltas of;
  // kRunNoDeltaBase (no_delta_base): none any more; neither: as before.
  std::optional<BaseDigests> delta_base;
  bool no_delta_base = false;
};

// Decodes `payload`, which must outlive the RunFrame. kCorrupt when it is
// malformed (the session process then exits: the host speaks nonsense).
StatusOr<RunFrame> ReadRunFrame(std::string_view payload);

}  // namespace dolsot
