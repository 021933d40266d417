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
  w.U8(s.sandbox ? 1 : 0);
  if (s.sandbox) {
    const SandboxPolicy& p = *s.sandbox;
    w.U8(p.network ? 1 : 0).U8(p.best_effort ? 1 : 0);
    w.U32(static_cast<std::uint32_t>(p.mounts.size()));
    for (const SandboxMount& m : p.mounts) {
      w.Str(m.virtual_path).Str(m.host_path).U8(static_cast<std::uint8_t>(m.mode));
    }
    w.U32(static_cast<std::uint32_t>(p.env.size()));
    for (const auto& [name, value] : p.env) w.Str(name).Str(value);
    w.U64(p.memory_mb).U64(p.processes).U64(p.open_files).U64(p.file_size_mb);
    w.U64(p.disk_mb).U64(p.cpu_seconds);
    w.Strs(s.sandbox_hidden);
  }
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
  if (r.U8() != 0) {
    SandboxPolicy p;
    p.network = r.U8() != 0;
    p.best_effort = r.U8() != 0;
    std::uint32_t mounts = r.U32();
    if (mounts > payload.size()) return CorruptError("malformed HELLO payload (mount count)");
    for (std::uint32_t i = 0; i < mounts; ++i) {
      SandboxMount m;
      m.virtual_path = r.Str();
      m.host_path = r.Str();
      std::uint8_t mode = r.U8();
      if (mode > static_cast<std::uint8_t>(MountMode::kOverlay)) {
        return CorruptError("malformed HELLO payload (mount mode)");
      }
      m.mode = static_cast<MountMode>(mode);
      p.mounts.push_back(std::move(m));
    }
    std::uint32_t vars = r.U32();
    if (vars > payload.size()) return CorruptError("malformed HELLO payload (env count)");
    for (std::uint32_t i = 0; i < vars; ++i) {
      std::string name = r.Str();
      p.env[name] = r.Str();
    }
    p.memory_mb = r.U64();
    p.processes = r.U64();
    p.open_files = r.U64();
    p.file_size_mb = r.U64();
    p.disk_mb = r.U64();
    p.cpu_seconds = r.U64();
    s.sandbox_hidden = r.Strs();
    s.sandbox = std::move(p);
  }
  DOLSOT_RETURN_IF_ERROR(r.Finish("HELLO"));
  return s;
}

}  // namespace dolsot
