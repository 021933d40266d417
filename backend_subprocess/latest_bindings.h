// LatestBindings: what binding cells bound since some point, the last value
// of each name (marshal, as protocol::Bindings carries them), the session's
// cell count after the last of them, and their size. The host keeps one for
// the snapshot a promotion replays them into (LiveSession) and one for the
// store's journal (SessionJournal); a journal's reader merges its frames
// with one. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend_subprocess/protocol.h"

namespace dolsot {

class LatestBindings {
 public:
  // Adds a cell's (or a frame's) bindings: each name's value replaces the
  // one kept; the cell count is theirs.
  void Merge(protocol::Bindings bindings);
  void Clear();
  bool empty() const { return values_.empty(); }
  // Bytes kept: every name and value, and 8 per name.
  std::size_t bytes() const { return bytes_; }
  // The names kept, sorted.
  std::vector<std::string> names() const;
  // What is kept as one Bindings (names sorted), copied or taken (Take
  // leaves this empty).
  protocol::Bindings Copy() const;
  protocol::Bindings Take();

 private:
  std::map<std::string, std::string> values_;
  std::uint64_t cells_run_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace dolsot
