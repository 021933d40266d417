// LatestBindings: what binding cells bound since some point, the last value
// of each name (marshal, as protocol::Bindings carries them), the session's
// cell count after the last of them, and their size. The host keeps one for
// the snapshot a promotion replays them into (LiveSession) and one for the
// store's journal (SessionJournal); a journal's reader merges its frames
// with one. Names keep the order they were first bound in, as the
// session's namespace (a dict) does: replayed in that order, a name new
// since the snapshot lands where it was, so a rollback leaves globals() in
// the order it had. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
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
  bool empty() const { return entries_.empty(); }
  // Bytes kept: every name and value, and 8 per name.
  std::size_t bytes() const { return bytes_; }
  // The names kept, in the order first bound.
  std::vector<std::string> names() const;
  // What is kept as one Bindings (names in the order first bound), copied
  // or taken (Take leaves this empty).
  protocol::Bindings Copy() const;
  protocol::Bindings Take();

 private:
  std::vector<std::pair<std::string, std::string>> entries_;  // name, value
  std::unordered_map<std::string, std::size_t> index_;          // name -> entries_ index
  std::uint64_t cells_run_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace dolsot
