// Encoding of the kHello frame.
#include "backend_subprocess/worker_settings.h"

#include "backend_subprocess/protocol.h"

namespace dolsot {

std::vector<std::string> WorkerSettings::Aliases() const {
  std::vector<std::string> out;
  for (const auto& [alias, module] : toolboxes) out.push_back(alias);
  return out;
}

std::string EncodeHello(const WorkerSettings& s) {
  protocol::PayloadWriter w;
  w.U32(protocol::kProtocolVersion);
  w.U32(static_cast<std::uint32_t>(s.toolboxes.size()));
  for (const auto& [alias, module] : s.toolboxes) w.Str(alias).Str(module);
  w.Strs(s.python_path).Str(s.cwd).U8(s.snapshots ? 1 : 0);
  w.U8(static_cast<std::uint8_t>(s.checkpoint));
  w.U64(s.max_repr);
  return w.Take();
}

StatusOr<WorkerSettings> DecodeHello(std::string_view payload) {
  protocol::PayloadReader r(payload);
  std::uint32_t version = r.U32();
  if (version != protocol::kProtocolVersion) {
    return Status(ErrorCode::kUnavailable,
                  "worker protocol version mismatch: host speaks " + std::to_string(version) +
                      ", worker speaks " + std::to_string(protocol::kProtocolVersion));
  }
  WorkerSettings s;
  std::uint32_t count = r.U32();
  if (count > payload.size()) return CorruptError("malformed HELLO payload (toolbox count)");
  for (std::uint32_t i = 0; i < count; ++i) {
    std::string alias = r.Str();
    s.toolboxes[alias] = r.Str();
  }
  s.python_path = r.Strs();
  s.cwd = r.Str();
  s.snapshots = r.U8() != 0;
  std::uint8_t mode = r.U8();
  if (mode > static_cast<std::uint8_t>(CheckpointMode::kOff)) {
    return CorruptError("malformed HELLO payload (checkpoint mode)");
  }
  s.checkpoint = static_cast<CheckpointMode>(mode);
  s.max_repr = static_cast<std::size_t>(r.U64());
  DOLSOT_RETURN_IF_ERROR(r.Finish("HELLO"));
  return s;
}

}  // namespace dolsot
