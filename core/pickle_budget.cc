// What a session's pickle would build in the host (see pickle_budget.h); the
// walk itself is pickle_walk.h.
#include "core/pickle_budget.h"

#include <new>

#include "core/pickle_walk.h"

namespace dolsot {

using pickle_walk::GlobalName;
using pickle_walk::kGlobals;
using pickle_walk::Walk;

StatusOr<PickleShape> WalkPickle(std::string_view data, std::uint64_t max_bytes) {
  thread_local Walk::Scratch scratch;
  auto reset = [](auto& vector) {
    vector.clear();
    // A big walk's memory goes back once it is over.
    if (vector.capacity() > 4096) vector.shrink_to_fit();
  };
  try {
    Walk walk(data, max_bytes, scratch);
    StatusOr<PickleShape> shape =
        walk.Run() ? StatusOr<PickleShape>(walk.shape()) : StatusOr<PickleShape>(walk.error());
    reset(scratch.stack), reset(scratch.memo), reset(scratch.items), reset(scratch.popped);
    reset(scratch.marks), reset(scratch.arena);
    return shape;
  } catch (const std::bad_alloc&) {
    reset(scratch.stack), reset(scratch.memo), reset(scratch.items), reset(scratch.popped);
    reset(scratch.marks), reset(scratch.arena);
    // The walk holds no more than a few times the data's size; a host that
    // cannot spare that cannot decode it either.
    return InvalidArgument("the host ran out of memory walking the session's pickle (" +
                           std::to_string(data.size()) + " bytes)");
  }
}

const std::vector<std::pair<std::string, std::string>>& SafePickleGlobals() {
  static const auto* names = [] {
    auto* list = new std::vector<std::pair<std::string, std::string>>();
    for (const GlobalName& entry : kGlobals) list->emplace_back(entry.module, entry.name);
    return list;
  }();
  return *names;
}

bool IsPlainPickle(std::string_view data) {
  // Within a budget far over any host's: over it is "not plain" (the slow
  // path, which has a budget of its own).
  StatusOr<PickleShape> shape = WalkPickle(data, std::uint64_t{1} << 40);
  return shape.ok() && *shape == PickleShape::kPlain;
}

}  // namespace dolsot
