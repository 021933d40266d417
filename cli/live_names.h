// LiveNames: the server's record of the names each session it holds live
// left after its last cell (Result::held), which `dolsot --names` reads
// without taking the session's turn or running anything in it. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/status.h"

namespace dolsot::cli {

class LiveNames {
 public:
  // After a cell of `sid` (its turn held): its names, or none when its
  // session process died (a crash, a lost worker: the state is then the
  // checkpoint's) or the call failed.
  void Note(const std::string& sid, const StatusOr<Result>& result);
  // `sid` left the server (released, reset, its profile retired).
  void Forget(const std::string& sid);
  void Clear();
  // The sorted names, if recorded.
  std::optional<std::vector<std::string>> Find(const std::string& sid) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::vector<std::string>> names_;
};

}  // namespace dolsot::cli
