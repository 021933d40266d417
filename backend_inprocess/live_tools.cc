// Tools that deliver the output before them first (see live_tools.h).
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "backend_inprocess/live_tools.h"

#include <utility>

namespace dolsot {
namespace {

constexpr const char* kStreamCapsule = "dolsot.LiveOutputStream";

void DeleteStream(PyObject* capsule) {
  delete static_cast<std::shared_ptr<LiveOutputStream>*>(
      PyCapsule_GetPointer(capsule, kStreamCapsule));
}

// self: (capsule of the stream, the tool).
PyObject* CallFlushingFirst(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* stream = static_cast<std::shared_ptr<LiveOutputStream>*>(
      PyCapsule_GetPointer(PyTuple_GET_ITEM(self, 0), kStreamCapsule));
  if (stream == nullptr) return nullptr;
  Py_BEGIN_ALLOW_THREADS
  (*stream)->Flush();
  Py_END_ALLOW_THREADS
  return PyObject_Call(PyTuple_GET_ITEM(self, 1), args, kwargs);
}

PyMethodDef kFlushingToolMethod = {
    "tool", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&CallFlushingFirst)),
    METH_VARARGS | METH_KEYWORDS, "A host tool (dolsot delivers the output before the call first)."};

}  // namespace

PyObject* ToolsFlushingOutputFirst(PyObject* callables, std::shared_ptr<LiveOutputStream> stream) {
  auto* held = new std::shared_ptr<LiveOutputStream>(std::move(stream));
  PyObject* capsule = PyCapsule_New(held, kStreamCapsule, DeleteStream);
  if (capsule == nullptr) {
    delete held;
    return nullptr;
  }
  PyObject* wrapped = PyDict_New();
  PyObject *name = nullptr, *tool = nullptr;
  Py_ssize_t position = 0;
  while (wrapped != nullptr && PyDict_Next(callables, &position, &name, &tool)) {
    PyObject* self = PyTuple_Pack(2, capsule, tool);
    PyObject* function = self != nullptr ? PyCFunction_NewEx(&kFlushingToolMethod, self, nullptr)
                                         : nullptr;
    Py_XDECREF(self);
    if (function == nullptr || PyDict_SetItem(wrapped, name, function) < 0) Py_CLEAR(wrapped);
    Py_XDECREF(function);
  }
  Py_DECREF(capsule);
  return wrapped;
}

}  // namespace dolsot
