// SessionContext: the contextvars.Context an InProcessSession's cells run in,
// one per session, so what a cell sets in a ContextVar (decimal's current
// context among them) stays with its session: another session's cells and
// the host's threads never see it, and the session's next cell does.
//
// Created empty on first use, not copied from the caller's context: a copy
// shares the values, and decimal's context is a mutable object, so a copy
// of the host's context would let a cell change the host's decimal context
// in place. In an empty context every ContextVar reads its default, and
// decimal makes the session its own context from decimal.DefaultContext the
// first time a cell asks for it.
#pragma once

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

// Owns one reference to a contextvars.Context. Not thread-safe: its session
// runs one cell at a time.
class SessionContext {
 public:
  SessionContext() = default;
  // Releases the context, taking the GIL (nothing once the interpreter is
  // finalized). Never called with the context entered.
  ~SessionContext();
  SessionContext(const SessionContext&) = delete;
  SessionContext& operator=(const SessionContext&) = delete;

  // Hands the reference over (nullptr when none was made yet); the caller
  // releases it under the GIL.
  PyObject* Release();

 private:
  friend class SessionContextScope;
  PyObject* context_ = nullptr;
};

// Enters the session's context on the calling thread for the scope (made on
// first use). Needs the GIL, in the constructor and the destructor, on one
// thread.
class SessionContextScope {
 public:
  explicit SessionContextScope(SessionContext& session);
  ~SessionContextScope();
  SessionContextScope(const SessionContextScope&) = delete;
  SessionContextScope& operator=(const SessionContextScope&) = delete;

  // False when the context could not be made or entered: the Python error
  // is set and the cell must not run.
  bool entered() const { return entered_ != nullptr; }

 private:
  PyObject* entered_ = nullptr;  // borrowed from the SessionContext
};

}  // namespace dolsot
