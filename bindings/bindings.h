// One Bind* function per bind_*.cc file; module.cc calls them in order.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>
#include <optional>

#include "core/cell_gate.h"
#include "core/session_store.h"
#include "core/status.h"
#include "sandbox/policy.h"

namespace dolsot::bindings {

void BindErrors(pybind11::module_& m);     // bind_errors.cc: exception classes
void BindCore(pybind11::module_& m);       // bind_core.cc: Result, SessionInfo, config, ids
void BindStores(pybind11::module_& m);     // bind_stores.cc: FileStore, MemoryStore, PyStore
void BindSandbox(pybind11::module_& m);    // bind_sandbox.cc: check_ast, Policy, Finding
void BindBackend(pybind11::module_& m);    // bind_backend.cc: Backend, Capabilities (every method)
void BindInProcess(pybind11::module_& m);  // bind_inprocess.cc: InProcessSession
void BindRepl(pybind11::module_& m);       // bind_repl.cc: Repl, the worker entry point

// A C++ store for `store`: a bound FileStore/MemoryStore as is, any other
// object with load/save/delete/list wrapped (called with the GIL). None: nullptr.
// Raises ConfigError when the object lacks a method.
std::shared_ptr<SessionStore> StoreFromPython(pybind11::handle store);

// The gates a Python `gate=` argument stands for, in their pipeline slots:
// dolsot.sandbox.check_ast and AstGate run as the C++ AST gate directly; any
// other callable gate(code), returning findings (empty or None: allowed) or
// raising (rejected, fail closed), is the caller's gate; None: neither.
struct HostGates {
  CellGate ast_gate;
  CellGate caller_gate;
};
HostGates GatesFromPython(pybind11::object gate);

// CPython's own statement starts (embedded/cpython_statements.h) as the AST
// gate's oracle: a Python host always has an interpreter at hand, so its gate
// refuses any cell tree-sitter reads differently from CPython.
sandbox::StatementOracle CpythonStatementOracle();

// Raises the Python exception class that matches `status` (never returns).
[[noreturn]] void ThrowStatus(const Status& status);
// Returns the value or raises.
template <typename T>
T ValueOrThrow(StatusOr<T>&& s) {
  if (!s.ok()) ThrowStatus(s.status());
  return std::move(s).value();
}
inline void ThrowIfError(const Status& s) {
  if (!s.ok()) ThrowStatus(s);
}

// A count of characters (max_output, max_repr, max_text; 0 = no cap) as the
// core takes it; a negative value raises ConfigError naming `name`.
inline std::optional<std::size_t> CharactersArgument(const char* name, std::optional<long long> value) {
  if (!value) return std::nullopt;
  if (*value < 0) ThrowStatus({ErrorCode::kConfig, std::string(name) + " must be >= 0 (0: no cap)"});
  return static_cast<std::size_t>(*value);
}

}  // namespace dolsot::bindings
