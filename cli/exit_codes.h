// Named process exit codes of the dolsot command (docs/cli.md lists them).
// A run exits with Result::exit_code; these name the codes the CLI adds.
#pragma once

namespace dolsot::cli {

inline constexpr int kExitOk = 0;        // the cell ran and returned normally
inline constexpr int kExitFailure = 1;   // the cell raised, or dolsot/worker failed
inline constexpr int kExitUsage = 2;     // bad arguments, bad input or bad configuration
inline constexpr int kExitTimeout = 124; // the cell was killed at its timeout

}  // namespace dolsot::cli
