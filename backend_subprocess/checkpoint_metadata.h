// The host's side of a checkpoint blob, with no Python: where a stored base
// ends, its values' digests (for delta checkpoints), and the session's AST-gate
// memory, which rides in the blob as one entry the host writes and reads, never
// the session (docs/checkpoint-format.md, codec 6). The format: checkpoint_format.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/digest.h"
#include "core/gate_memory.h"
#include "core/status.h"

namespace dolsot {

// Where a stored checkpoint's base blob ends (a journal may follow it:
// checkpoint_journal.h) and its fingerprint: the CRC-32C of its header and
// of every entry's stored checksum, so it changes with any entry's content
// at the cost of a walk over the entries' headers (lengths only: checksums
// are the restore's business). kCorrupt when the header or a length is
// damaged.
struct CheckpointBase {
  std::uint64_t size = 0;
  std::uint32_t fingerprint = 0;
};
StatusOr<CheckpointBase> MeasureBase(std::string_view stored);

// What a delta checkpoint is taken against (docs/checkpoint-format.md
// "Delta frames"): a base blob and the digest of each of its named values'
// entries (codecs 1-3: EntryDigest, so the name and codec count too). A
// session's value whose entry has the same digest is the base's and need
// not be written again.
struct BaseDigests {
  CheckpointBase base;
  std::map<std::string, Digest128, std::less<>> entries;
};
// The digest of one entry (as BaseDigests keeps them): its payload, then
// its codec, name and size (the entry's bytes after its checksum, with the
// payload moved first, since a writer streaming it knows its size last).
Digest128 EntryDigest(std::string_view codec_name_and_size, std::string_view payload);
// The digests of `stored`'s base (a journal after it is ignored). kCorrupt
// when its header or a length is damaged.
StatusOr<BaseDigests> DigestBase(std::string_view stored);

// `blob` (a current-version blob from SerializeNamespace) gets the host's
// entries: `memory` as its gate-memory entry and, for a session that ran
// under a Sandbox, `sandbox_mark` (sandbox/sandbox_mark.h); any such entry
// the session wrote itself is dropped first. kCorrupt when `blob` is no
// such blob.
Status AttachHostEntries(std::string& blob, const GateMemory& memory,
                         const std::optional<std::string>& sandbox_mark);
inline Status AttachGateMemory(std::string& blob, const GateMemory& memory) {
  return AttachHostEntries(blob, memory, std::nullopt);
}
// The sandbox mark a stored blob carries (nullopt: none, an empty blob, or a
// blob older than marks), read before anything of it is unpickled. kCorrupt
// when the base is damaged up to the mark or the mark's checksum fails.
StatusOr<std::optional<std::string>> ReadSandboxMark(std::string_view blob);
// The memory a stored blob carries. An empty blob (a new session): a fresh,
// complete memory. A version 1 or 2 blob, or a version 3 blob without the
// entry: an incomplete one (the session's earlier cells are not known).
// Damage anywhere in the base: kCorrupt (a journal after it is not read).
StatusOr<GateMemory> ReadGateMemory(std::string_view blob);

}  // namespace dolsot
