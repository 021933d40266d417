// The Sandbox a checkpoint records, and comparing walls (see sandbox_mark.h).
#include "sandbox/sandbox_mark.h"

#include <charconv>
#include <cstdint>

#include "sandbox/mount_plan.h"

namespace dolsot {
namespace {

constexpr std::string_view kMarkVersion = "dolsot-sandbox-mark-1";

// A field: "<decimal length>:<bytes>".
void Put(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

class MarkReader {
 public:
  explicit MarkReader(std::string_view text) : text_(text) {}

  bool Next(std::string_view* field) {
    const std::size_t colon = text_.find(':', at_);
    if (colon == std::string_view::npos || colon == at_ || colon - at_ > 9) return false;
    std::size_t size = 0;
    auto parsed = std::from_chars(text_.data() + at_, text_.data() + colon, size);
    if (parsed.ec != std::errc() || parsed.ptr != text_.data() + colon) return false;
    if (size > text_.size() - colon - 1) return false;
    *field = text_.substr(colon + 1, size);
    at_ = colon + 1 + size;
    return true;
  }
  bool Number(std::uint64_t* value) {
    std::string_view field;
    if (!Next(&field) || field.empty()) return false;
    auto parsed = std::from_chars(field.data(), field.data() + field.size(), *value);
    return parsed.ec == std::errc() && parsed.ptr == field.data() + field.size();
  }
  bool Done() const { return at_ == text_.size(); }

 private:
  std::string_view text_;
  std::size_t at_ = 0;
};

struct Cap {
  const char* name;
  std::uint64_t SandboxPolicy::*field;
};
constexpr Cap kCaps[] = {{"memory_mb", &SandboxPolicy::memory_mb},
                         {"processes", &SandboxPolicy::processes},
                         {"open_files", &SandboxPolicy::open_files},
                         {"file_size_mb", &SandboxPolicy::file_size_mb},
                         {"disk_mb", &SandboxPolicy::disk_mb},
                         {"cpu_seconds", &SandboxPolicy::cpu_seconds}};

// How much a mount lets a cell change on the host.
int Freedom(MountMode mode) {
  switch (mode) {
    case MountMode::kReadOnly: return 0;
    case MountMode::kOverlay: return 1;
    case MountMode::kReadWrite: return 2;
  }
  return 2;
}

std::string Cap(std::uint64_t value) { return value == 0 ? "none" : std::to_string(value); }

}  // namespace

std::string EncodeSandboxMark(const SandboxPolicy& policy) {
  std::string out;
  Put(out, kMarkVersion);
  Put(out, policy.network ? "1" : "0");
  Put(out, policy.best_effort ? "1" : "0");
  for (const auto& cap : kCaps) Put(out, std::to_string(policy.*cap.field));
  Put(out, std::to_string(policy.mounts.size()));
  for (const SandboxMount& m : policy.mounts) {
    Put(out, NormalizePath(m.virtual_path));
    Put(out, NormalizePath(m.host_path));
    Put(out, MountModeName(m.mode));
  }
  return out;
}

StatusOr<SandboxPolicy> DecodeSandboxMark(std::string_view mark) {
  auto malformed = [](const std::string& what) {
    return CorruptError("a checkpoint's sandbox mark is malformed (" + what + ")");
  };
  MarkReader r(mark);
  std::string_view field;
  if (!r.Next(&field) || field != kMarkVersion) return malformed("not a version 1 mark");
  SandboxPolicy policy;
  std::uint64_t flag = 0;
  if (!r.Number(&flag) || flag > 1) return malformed("network");
  policy.network = flag == 1;
  if (!r.Number(&flag) || flag > 1) return malformed("best_effort");
  policy.best_effort = flag == 1;
  for (const auto& cap : kCaps) {
    if (!r.Number(&(policy.*cap.field))) return malformed(cap.name);
  }
  std::uint64_t mounts = 0;
  if (!r.Number(&mounts) || mounts > mark.size()) return malformed("mount count");
  for (std::uint64_t i = 0; i < mounts; ++i) {
    SandboxMount m;
    std::string_view virt, host, mode;
    if (!r.Next(&virt) || !r.Next(&host) || !r.Next(&mode)) return malformed("a mount");
    auto parsed = ParseMountMode(mode);
    if (!parsed.ok()) return malformed("a mount's mode");
    m.virtual_path = std::string(virt);
    m.host_path = std::string(host);
    m.mode = *parsed;
    policy.mounts.push_back(std::move(m));
  }
  if (!r.Done()) return malformed("trailing bytes");
  return policy;
}

std::string WeakerThanMark(const std::optional<SandboxPolicy>& have, const SandboxPolicy& mark) {
  if (!have) return "no Sandbox";
  std::string out;
  auto add = [&](const std::string& clause) { out += (out.empty() ? "" : "; ") + clause; };
  if (have->network && !mark.network) add("network=True (the session's had no network)");
  if (have->best_effort && !mark.best_effort) add("best_effort=True (the session's was not)");
  for (const auto& cap : kCaps) {
    const std::uint64_t mine = (*have).*cap.field, theirs = mark.*cap.field;
    if (theirs != 0 && (mine == 0 || mine > theirs)) {
      add(std::string(cap.name) + "=" + Cap(mine) + " (the session's was " + Cap(theirs) + ")");
    }
  }
  for (const SandboxMount& m : have->mounts) {
    const std::string virt = NormalizePath(m.virtual_path), host = NormalizePath(m.host_path);
    const SandboxMount* same = nullptr;
    for (const SandboxMount& t : mark.mounts) {
      if (NormalizePath(t.virtual_path) == virt && NormalizePath(t.host_path) == host) same = &t;
    }
    if (same == nullptr) {
      add("the mount " + virt + " = " + host + " (the session's walls did not have it)");
    } else if (Freedom(m.mode) > Freedom(same->mode)) {
      add("the mount " + virt + " " + MountModeName(m.mode) + " (the session's was " +
          MountModeName(same->mode) + ")");
    }
  }
  return out;
}

std::optional<SandboxPolicy> CarriedMark(const std::optional<SandboxPolicy>& own,
                                         const std::optional<SandboxPolicy>& restored) {
  if (restored && WeakerThanMark(own, *restored).empty()) return restored;
  return own;
}

}  // namespace dolsot
