// SessionInfo: what a store knows about one stored session.
#pragma once

#include <cstdint>
#include <string>

namespace dolsot {

struct SessionInfo {
  std::string id;
  std::uint64_t size_bytes = 0;
  double last_used = 0.0;  // seconds since the Unix epoch (last write)
};

}  // namespace dolsot
