// How the runtime half of the AST gate reports a refused store: as the static
// gate does ("line N, col C: [module-assignment] message"), located at the
// innermost frame of the cell's own code, raised as an exception the cell
// sees (and may catch: the store did not happen).
#pragma once

#include <string>

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

// "line N, col C: [module-assignment] <message>": the line and column of the
// innermost frame whose code is a cell's ("<cell ...>" filename), else of the
// innermost frame. The column is known from Python 3.11 on (the start of the
// instruction's source span, 1-based, in code points as the gate counts, from
// the cell's registered source); 3.10 reports col 1.
std::string RuntimeFinding(const std::string& message);

// Sets `exception_type` (AttributeError for attribute stores, TypeError for
// table changes) with RuntimeFinding(message). Needs the GIL. Returns -1, so
// a setattro or a method can `return RaiseRuntimeFinding(...)`.
int RaiseRuntimeFinding(PyObject* exception_type, const std::string& message);

// The text of `object` as str() gives it, or "?" (clears any error).
std::string TextOf(PyObject* object);

}  // namespace dolsot
