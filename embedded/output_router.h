// The stdio router: the object installed as sys.stdout, sys.stderr and
// sys.stdin. On a thread running a cell (cell_runtime.h's capture slot is
// set) it writes into that cell's capture and reads stdin as empty; on every
// other thread it forwards to the stream it replaced.
//
// Every function here needs the calling thread to hold the GIL.
#pragma once

#include "core/status.h"

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

struct CellRuntime;

// Installs the per-thread routing of sys.stdout, sys.stderr and sys.stdin
// (idempotent; RunCell calls it too, and re-installs it if someone replaced
// those streams). A thread running a cell writes stdout AND stderr into its
// own capture (one text, as an agent reads it) and reads stdin as empty
// (input() raises EOFError at once); every other thread reads and writes the
// streams that were there before. Threads a cell starts itself are "other
// threads": their output goes to the host's streams.
Status InstallCellIo();

// The router's type (a new reference; nullptr with an error set).
PyObject* NewRouterType();

// Makes sys.stdout/stderr/stdin routers (again, if someone replaced them, as
// pytest's capture does). Returns false with a Python error set on failure.
bool EnsureRouters(CellRuntime* runtime);

}  // namespace dolsot
