// Ref, an owned CPython reference released at scope exit, and the
// exception-taking helpers the embedded code shares. Include after
// <Python.h>; everything here needs the GIL.
#pragma once

#ifndef Py_PYTHON_H
#error "include <Python.h> before embedded/py_ref.h"
#endif

namespace dolsot {

// An owned reference, released on scope exit.
class Ref {
 public:
  Ref() = default;
  explicit Ref(PyObject* o) : o_(o) {}
  Ref(Ref&& other) noexcept : o_(other.release()) {}
  Ref& operator=(Ref&& other) noexcept {
    reset(other.release());
    return *this;
  }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { Py_XDECREF(o_); }
  PyObject* get() const { return o_; }
  explicit operator bool() const { return o_ != nullptr; }
  PyObject* release() {
    PyObject* o = o_;
    o_ = nullptr;
    return o;
  }
  void reset(PyObject* o) {
    Py_XDECREF(o_);
    o_ = o;
  }

 private:
  PyObject* o_ = nullptr;
};

// The exception being raised (normalized, __traceback__ set), taken off the
// error indicator. Returns a new reference, or nullptr when none is set.
inline PyObject* TakeRaisedException() {
#if PY_VERSION_HEX >= 0x030C0000
  return PyErr_GetRaisedException();
#else
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  if (type == nullptr) return nullptr;
  PyErr_NormalizeException(&type, &value, &traceback);
  if (traceback != nullptr && value != nullptr) PyException_SetTraceback(value, traceback);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  return value;
#endif
}

}  // namespace dolsot
