// GatedSession: what an in-process session with an AST gate holds so that the
// gate's module-assignment rule also holds at run time, for the stores a
// static check cannot see (an alias of a module, a class reached through a
// module, a table kept in a name). Its builtins' `__import__` returns module
// views (embedded/module_view.h), its injected modules are views, its
// builtins' `__name__` is a str object of its own that marks the classes its
// cells define, and CellScope marks the thread running one of its cells for
// the class-store guard (embedded/class_store_guard.h) and the dataclass
// Field guard (embedded/dataclass_field_guard.h).
//
// Everything here needs the GIL, but the destructor (it takes it).
#pragma once

#include <memory>

#include "core/status.h"
#include "embedded/gated_cell.h"

namespace dolsot {

// Installs the interpreter-wide parts (the class-store guard and the Field
// guard) in the running interpreter, for the first gated session. Idempotent.
Status InstallRuntimeGuard();

class GatedSession {
 public:
  // Prepares the session's own `builtins` dict (a copy of the builtins
  // module's) and remembers its namespace `globals` (both borrowed; they must
  // outlive this). Installs the runtime guard if it is not yet.
  static StatusOr<std::unique_ptr<GatedSession>> Create(PyObject* globals, PyObject* builtins);
  ~GatedSession();
  GatedSession(const GatedSession&) = delete;
  GatedSession& operator=(const GatedSession&) = delete;

  // What the session binds for an injected object (a new reference): a
  // module's view, anything else itself. nullptr with a Python error set.
  static PyObject* Bind(PyObject* object);

  // Marks the calling thread as running this session's gated cell for the
  // scope; a null session marks nothing (an ungated session pays nothing).
  class CellScope {
   public:
    explicit CellScope(GatedSession* session);
    ~CellScope();
    CellScope(const CellScope&) = delete;
    CellScope& operator=(const CellScope&) = delete;

   private:
    GatedSession* session_;
    const GatedCell* outer_ = nullptr;
  };

 private:
  GatedSession() = default;
  void PruneNewborn();

  GatedCell cell_;  // own_module_name and newborn_classes owned
  long long next_prune_ = 64;
};

}  // namespace dolsot
