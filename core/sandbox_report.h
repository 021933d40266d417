// SandboxReport: which kernel-enforced layers a backend's cells run under, as
// the worker set them up (Backend::SandboxStatus; the policy that asks for
// them is sandbox/sandbox_policy.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dolsot {

// One layer of a running sandbox, as the worker set it up.
struct SandboxLayer {
  std::string name;    // "user-namespace", "seccomp", "landlock", ...
  bool active = false;
  std::string detail;  // what it does, or why it is missing and how to get it

  bool operator==(const SandboxLayer&) const = default;
};

struct SandboxReport {
  std::vector<SandboxLayer> layers;

  bool Active(std::string_view name) const;
  // One line per layer: "  [on ] name: detail" / "  [off] name: detail".
  std::string ToText() const;
  // A compact encoding for the worker's HELLO_OK (name, active, detail).
  std::string Encode() const;
  static StatusOr<SandboxReport> Decode(std::string_view text);
};

}  // namespace dolsot
