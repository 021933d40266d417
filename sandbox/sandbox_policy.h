// SandboxPolicy: what a Repl's Sandbox walls off (the value type); the
// SandboxReport that says which layers a worker actually runs under is
// core/sandbox_report.h (Backend::SandboxStatus answers it). Not the
// AST gate's Policy (policy.h): the gate reads a cell's source; the Sandbox
// is enforced by the kernel around the worker (sandbox_setup.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/sandbox_report.h"
#include "core/status.h"

namespace dolsot {

enum class MountMode {
  kReadOnly,   // "read-only": the host directory, no writes
  kReadWrite,  // "read-write": writes reach the host directory
  kOverlay,    // "overlay": reads from the host, writes kept in the sandbox
};

const char* MountModeName(MountMode mode);
// "read-only", "read-write" or "overlay" (also "ro", "rw"); else kInvalidArgument.
StatusOr<MountMode> ParseMountMode(std::string_view text);

// The host directory (or file) `host_path`, seen by cells at `virtual_path`.
struct SandboxMount {
  std::string virtual_path;
  std::string host_path;
  MountMode mode = MountMode::kReadOnly;

  bool operator==(const SandboxMount&) const = default;
};

// `VIRT=HOST[:MODE]` (the CLI's --mount); MODE defaults to read-only.
StatusOr<SandboxMount> ParseMountSpec(std::string_view spec);

// The Sandbox: every field has a safe default. A cap of 0 means "no cap".
struct SandboxPolicy {
  bool network = false;              // false: an empty network namespace
  std::vector<SandboxMount> mounts;  // besides what Python itself needs
  std::map<std::string, std::string> env;  // added to the allow-list
  std::uint64_t memory_mb = 4096;    // RLIMIT_AS per process
  std::uint64_t processes = 512;     // RLIMIT_NPROC, per worker (its user namespace)
  std::uint64_t open_files = 1024;   // RLIMIT_NOFILE per process
  std::uint64_t file_size_mb = 1024; // RLIMIT_FSIZE per process
  std::uint64_t disk_mb = 512;       // the scratch tmpfs (and /dev/shm) size each
  std::uint64_t cpu_seconds = 0;     // RLIMIT_CPU per process (its lifetime)
  // Accept fewer layers than asked when the kernel or the user cannot give
  // them (sandbox_report() says which); false: such a Repl fails to start.
  bool best_effort = false;

  bool operator==(const SandboxPolicy&) const = default;
};

// kInvalidArgument naming the first bad field: mount paths absolute, without
// "..", not "/" nor under /proc or /dev, no two mounts at one virtual path;
// env names non-empty without '=' or NUL; caps within sane bounds; an
// overlay's host path without ',', ':' or '\\' (overlayfs's option syntax).
Status ValidateSandboxPolicy(const SandboxPolicy& policy);

// The host variables a sandboxed worker keeps (besides the policy's env):
// PATH, LANG, LC_*, TZ, TERM.
bool SandboxKeepsVariable(const std::string& name);

// Where a sandboxed worker's scratch lives inside the sandbox (its cwd,
// HOME and TMPDIR).
inline constexpr char kSandboxScratch[] = "/tmp";

}  // namespace dolsot
