// The stdio router (see output_router.h).
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "embedded/output_router.h"

#include <string>
#include <string_view>

#include "embedded/cell_runtime.h"
#include "embedded/py_ref.h"
#include "embedded/python_text.h"

namespace dolsot {
namespace {

// ---------------------------------------------------------------------------
// The router: the object installed as sys.stdout, sys.stderr and sys.stdin.
// On a thread running a cell it writes into that cell's capture (stdin reads
// as empty); on every other thread it forwards to the stream it replaced.

enum class StreamKind : int { kStdout, kStderr, kStdin };

struct RouterObject {
  PyObject_HEAD
  PyObject* original;  // the stream it replaced (may be None)
  StreamKind kind;
};

RouterObject* AsRouter(PyObject* self) { return reinterpret_cast<RouterObject*>(self); }
bool Capturing() { return CurrentCaptureSlot() != nullptr; }

void RouterDealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  Py_XDECREF(AsRouter(self)->original);
  type->tp_free(self);
  Py_DECREF(type);
}

// Calls original.<name>(*args, **kwargs); without an original, returns
// `fallback` (a new reference) instead.
PyObject* Forward(PyObject* self, const char* name, PyObject* args, PyObject* kwargs,
                  PyObject* fallback) {
  PyObject* original = AsRouter(self)->original;
  if (original == nullptr || original == Py_None) return fallback;
  Py_XDECREF(fallback);
  Ref method(PyObject_GetAttrString(original, name));
  if (!method) return nullptr;
  Ref no_args(args == nullptr ? PyTuple_New(0) : nullptr);
  return PyObject_Call(method.get(), args != nullptr ? args : no_args.get(), kwargs);
}

PyObject* RouterWrite(PyObject* self, PyObject* text) {
  if (!Capturing() || AsRouter(self)->kind == StreamKind::kStdin) {
    Ref args(PyTuple_Pack(1, text));
    if (!args) return nullptr;
    // Without a stream to forward to (a host with no stdout), output is dropped.
    return Forward(self, "write", args.get(), nullptr,
                   PyUnicode_Check(text) ? PyLong_FromSsize_t(PyUnicode_GET_LENGTH(text))
                                         : Py_NewRef(Py_None));
  }
  if (!PyUnicode_Check(text)) {
    PyErr_Format(PyExc_TypeError, "write() argument must be str, not %.100s",
                 Py_TYPE(text)->tp_name);
    return nullptr;
  }
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text, &size);
  if (data != nullptr) {
    CurrentCaptureSlot()->Write(std::string_view(data, static_cast<std::size_t>(size)),
                                PyUnicode_GET_LENGTH(text));
  } else {
    PyErr_Clear();
    CurrentCaptureSlot()->Write(Utf8ForReader(text), -1);
  }
  return PyLong_FromSsize_t(PyUnicode_GET_LENGTH(text));
}

PyObject* RouterWriteLines(PyObject* self, PyObject* lines) {
  if (!Capturing()) {
    Ref args(PyTuple_Pack(1, lines));
    return args ? Forward(self, "writelines", args.get(), nullptr, Py_NewRef(Py_None)) : nullptr;
  }
  Ref iterator(PyObject_GetIter(lines));
  if (!iterator) return nullptr;
  while (Ref line{PyIter_Next(iterator.get())}) {
    Ref written(RouterWrite(self, line.get()));
    if (!written) return nullptr;
  }
  if (PyErr_Occurred()) return nullptr;
  Py_RETURN_NONE;
}

PyObject* RouterFlush(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (Capturing()) Py_RETURN_NONE;
  return Forward(self, "flush", args, kwargs, Py_NewRef(Py_None));
}

PyObject* RouterIsatty(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (Capturing()) Py_RETURN_FALSE;
  return Forward(self, "isatty", args, kwargs, Py_NewRef(Py_False));
}

PyObject* RouterFileno(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (Capturing()) {
    // input() then takes its non-terminal path: readline() on this router.
    PyErr_SetString(PyExc_OSError, "a dolsot cell's stream has no file descriptor");
    return nullptr;
  }
  PyObject* original = AsRouter(self)->original;
  if (original == nullptr || original == Py_None) {
    PyErr_SetString(PyExc_OSError, "no underlying stream");
    return nullptr;
  }
  return Forward(self, "fileno", args, kwargs, nullptr);
}

// read(), readline(), readlines(): empty on a cell's thread (stdin is empty).
PyObject* RouterReadEmpty(PyObject* self, const char* name, PyObject* args, PyObject* kwargs,
                          bool as_list) {
  if (Capturing()) {
    if (AsRouter(self)->kind != StreamKind::kStdin) {
      PyErr_SetString(PyExc_OSError, "not readable");
      return nullptr;
    }
    return as_list ? PyList_New(0) : PyUnicode_FromString("");
  }
  return Forward(self, name, args, kwargs, as_list ? PyList_New(0) : PyUnicode_FromString(""));
}

PyObject* RouterRead(PyObject* self, PyObject* args, PyObject* kwargs) {
  return RouterReadEmpty(self, "read", args, kwargs, false);
}
PyObject* RouterReadline(PyObject* self, PyObject* args, PyObject* kwargs) {
  return RouterReadEmpty(self, "readline", args, kwargs, false);
}
PyObject* RouterReadlines(PyObject* self, PyObject* args, PyObject* kwargs) {
  return RouterReadEmpty(self, "readlines", args, kwargs, true);
}

PyObject* RouterReadable(PyObject* self, PyObject*) {
  return PyBool_FromLong(AsRouter(self)->kind == StreamKind::kStdin);
}
PyObject* RouterWritable(PyObject* self, PyObject*) {
  return PyBool_FromLong(AsRouter(self)->kind != StreamKind::kStdin);
}

// Any other attribute (encoding, buffer, ...) comes from the replaced stream.
PyObject* RouterGetAttr(PyObject* self, PyObject* name) {
  PyObject* found = PyObject_GenericGetAttr(self, name);
  if (found != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) return found;
  PyObject* original = AsRouter(self)->original;
  if (original == nullptr || original == Py_None) return nullptr;
  PyErr_Clear();
  return PyObject_GetAttr(original, name);
}

#define DOLSOT_KW_METHOD(name, fn) \
  {name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fn)), METH_VARARGS | METH_KEYWORDS, nullptr}

PyMethodDef kRouterMethods[] = {
    {"write", RouterWrite, METH_O, nullptr},
    {"writelines", RouterWriteLines, METH_O, nullptr},
    DOLSOT_KW_METHOD("flush", RouterFlush),
    DOLSOT_KW_METHOD("isatty", RouterIsatty),
    DOLSOT_KW_METHOD("fileno", RouterFileno),
    DOLSOT_KW_METHOD("read", RouterRead),
    DOLSOT_KW_METHOD("readline", RouterReadline),
    DOLSOT_KW_METHOD("readlines", RouterReadlines),
    {"readable", RouterReadable, METH_NOARGS, nullptr},
    {"writable", RouterWritable, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

#undef DOLSOT_KW_METHOD

PyType_Slot kRouterSlots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(RouterDealloc)},
    {Py_tp_getattro, reinterpret_cast<void*>(RouterGetAttr)},
    {Py_tp_methods, kRouterMethods},
    {Py_tp_doc, const_cast<char*>("dolsot: routes a cell thread's stdio to its capture")},
    {0, nullptr},
};

PyType_Spec kRouterSpec = {
    "dolsot.CellStream", sizeof(RouterObject), 0, Py_TPFLAGS_DEFAULT, kRouterSlots,
};

}  // namespace

PyObject* NewRouterType() { return PyType_FromSpec(&kRouterSpec); }

bool EnsureRouters(CellRuntime* runtime) {
  static const StreamKind kKinds[] = {StreamKind::kStdout, StreamKind::kStderr,
                                      StreamKind::kStdin};
  auto* type = reinterpret_cast<PyTypeObject*>(runtime->router_type);
  for (int i = 0; i < 3; ++i) {
    PyObject* name = runtime->stream_names[i];
    PyObject* current = PyDict_GetItemWithError(runtime->sys_dict, name);  // borrowed
    if (current == nullptr && PyErr_Occurred()) return false;
    if (current != nullptr && Py_TYPE(current) == type) continue;
    Ref router(type->tp_alloc(type, 0));
    if (!router) return false;
    AsRouter(router.get())->original = Py_NewRef(current != nullptr ? current : Py_None);
    AsRouter(router.get())->kind = kKinds[i];
    if (PyDict_SetItem(runtime->sys_dict, name, router.get()) < 0) return false;
  }
  return true;
}

Status InstallCellIo() {
  CellRuntime* runtime = GetRuntime();
  if (runtime == nullptr || !EnsureRouters(runtime)) {
    Ref exc(TakeRaisedException());
    return InternalError("cannot install the cell stdio router: " +
                         (exc ? ShortExceptionText(exc.get()) : std::string("unknown error")));
  }
  return Status::Ok();
}

}  // namespace dolsot
