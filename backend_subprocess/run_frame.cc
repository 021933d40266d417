// RunFrame: decodes a RUN frame's payload, every length checked
// (protocol.h's PayloadReader).
#include "backend_subprocess/run_frame.h"

#include <cstdint>
#include <utility>

#include "backend_subprocess/protocol.h"

namespace dolsot {

StatusOr<RunFrame> ReadRunFrame(std::string_view payload) {
  protocol::PayloadReader r(payload);
  RunFrame run;
  run.max_output = static_cast<std::size_t>(r.U64());
  run.code = r.StrView();
  run.tools.names = r.Strs();
  run.tools.final_name = r.Str();
  run.tool_pipes = r.U8() != 0;
  const std::uint32_t variable_count = r.U32();
  for (std::uint32_t i = 0; i < variable_count && i < payload.size(); ++i) {
    ReceivedVariable v;
    v.name = r.Str();
    v.resent = r.U8() == 0;
    if (v.resent) v.pickle = r.StrView();
    run.variables.push_back(std::move(v));
  }
  const std::uint8_t run_flags = r.U8();
  run.checkpoint_owed = (run_flags & protocol::kRunCheckpointOwed) != 0;
  run.snapshot_owed = (run_flags & protocol::kRunSnapshotOwed) != 0;
  run.host_has_names = (run_flags & protocol::kRunHostHasNames) != 0;
  run.live_output = (run_flags & protocol::kRunLiveOutput) != 0;
  run.live_images = (run_flags & protocol::kRunLiveImages) != 0;
  if ((run_flags & protocol::kRunDeltaBase) != 0) {
    StatusOr<BaseDigests> base = protocol::ReadBaseDigests(r);
    if (!base.ok()) return base.status();
    run.delta_base = std::move(base).value();
  } else {
    run.no_delta_base = (run_flags & protocol::kRunNoDeltaBase) != 0;
  }
  DOLSOT_RETURN_IF_ERROR(r.Finish("RUN"));
  return run;
}

}  // namespace dolsot
