// `dolsot kernel ...`: the Jupyter kernel whose cells run in a dolsot session
// (docs/jupyter.md). The kernel is Python (dolsot.kernel, on ipykernel's
// machinery): this command finds the interpreter dolsot's package belongs to
// and replaces itself with `PYTHON -m dolsot.kernel ARGS...`, telling the
// kernel which CLI to run its cells with (DOLSOT_CLI: this executable).
#pragma once

#include <ostream>

namespace dolsot::cli {

// argv[0] is "kernel"; the rest go to the Python module unchanged
// (`install [--user] [--name N] [--session S]`, or `--session S -f FILE`).
// Returns only when the interpreter cannot be found or started (exit 2,
// with one `dolsot: error:` line on `err`).
int KernelCommand(int argc, char** argv, std::ostream& err);

}  // namespace dolsot::cli
