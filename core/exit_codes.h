// The exit codes dolsot gives a cell and the dolsot command, named once for
// every part (a Result's exit_code, the CLI's process status; docs/cli.md).
#pragma once

namespace dolsot {

inline constexpr int kExitOk = 0;            // the cell ran and returned normally
inline constexpr int kExitFailure = 1;       // the cell raised, was rejected, or dolsot failed
inline constexpr int kExitUsage = 2;         // the CLI: bad arguments, input or configuration
inline constexpr int kExitNotSaved = 75;     // the CLI: the cell ran, its state was not saved
                                             // (sysexits' EX_TEMPFAIL: try again)
inline constexpr int kExitTimeout = 124;     // the cell was stopped at its timeout
inline constexpr int kExitInterrupted = 130; // the cell was interrupted (Ctrl-C, Interrupt())

}  // namespace dolsot
