// Names from a stored checkpoint (see stored_names.h).
#include "cli/stored_names.h"

#include <algorithm>
#include <set>

#include "backend_subprocess/checkpoint_format.h"
#include "backend_subprocess/checkpoint_journal.h"
#include "core/config.h"
#include "core/file_store.h"

namespace dolsot::cli {
namespace {

namespace format = checkpoint_format;

Status AddValueNames(std::string_view blob, std::set<std::string>& names) {
  auto entries = format::ParseBlob(blob);
  if (!entries.ok()) return entries.status();
  for (const format::EntryView& entry : *entries) {
    if (format::IsValueCodec(static_cast<std::uint8_t>(entry.codec))) {
      names.emplace(entry.name);
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<std::string>> CheckpointNames(std::string_view stored) {
  const SplitCheckpoint split = SplitJournal(stored);
  std::set<std::string> names;
  if (split.has_delta) {
    names.insert(split.delta_kept.begin(), split.delta_kept.end());
    DOLSOT_RETURN_IF_ERROR(AddValueNames(split.delta_blob, names));
  } else {
    DOLSOT_RETURN_IF_ERROR(AddValueNames(split.base, names));
  }
  names.insert(split.bindings.names.begin(), split.bindings.names.end());
  return std::vector<std::string>(names.begin(), names.end());
}

StatusOr<SessionNames> NamesInStore(SessionStore& store, const std::string& session_id) {
  auto stored = store.Load(session_id);
  if (!stored.ok()) return stored.status();
  SessionNames names;
  if (!stored->has_value()) return names;  // kNone
  auto listed = CheckpointNames(**stored);
  if (!listed.ok()) {
    return Status(listed.status().code(), "the checkpoint of session " + session_id +
                                              " cannot be read: " + listed.status().message());
  }
  names.source = SessionNames::Source::kCheckpoint;
  names.names = std::move(listed).value();
  return names;
}

StatusOr<SessionNames> StoredSessionNames(const std::string& session_id) {
  auto config = ResolveConfig(ConfigOverrides{});
  if (!config.ok()) return config.status();
  auto store = FileStore::Open(config->cache_dir, config->ttl_days);
  if (!store.ok()) return store.status();
  return NamesInStore(**store, session_id);
}

}  // namespace dolsot::cli
