// SessionContext (see session_context.h).
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "embedded/session_context.h"

namespace dolsot {

SessionContext::~SessionContext() {
  if (context_ == nullptr || !Py_IsInitialized()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_CLEAR(context_);
  PyGILState_Release(gil);
}

PyObject* SessionContext::Release() {
  PyObject* context = context_;
  context_ = nullptr;
  return context;
}

SessionContextScope::SessionContextScope(SessionContext& session) {
  if (session.context_ == nullptr) session.context_ = PyContext_New();
  if (session.context_ != nullptr && PyContext_Enter(session.context_) == 0) {
    entered_ = session.context_;
  }
}

SessionContextScope::~SessionContextScope() {
  if (entered_ == nullptr) return;
  // Python code cannot leave another context entered on this thread
  // (Context.run exits what it enters), so this succeeds; a C extension
  // that did would keep the thread in its context, and the error is dropped
  // rather than raised into the next cell.
  if (PyContext_Exit(entered_) < 0) PyErr_Clear();
}

}  // namespace dolsot
