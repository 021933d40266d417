// The Python face of a session's pickle walk (see plain_pickle.h).
#include "bindings/plain_pickle.h"

#include <pybind11/stl.h>


#include "core/pickle_budget.h"

namespace dolsot::bindings {
namespace {

PyObject* PlainPickle(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 1 || !PyBytes_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "plain_pickle(data: bytes)");
    return nullptr;
  }
  std::string_view data(PyBytes_AS_STRING(args[0]),
                        static_cast<std::size_t>(PyBytes_GET_SIZE(args[0])));
  return PyBool_FromLong(IsPlainPickle(data) ? 1 : 0);
}

PyObject* CheckPickle(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyBytes_Check(args[0]) || !PyLong_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "check_pickle(data: bytes, max_bytes: int)");
    return nullptr;
  }
  const unsigned long long max_bytes = PyLong_AsUnsignedLongLong(args[1]);
  if (max_bytes == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return nullptr;
  std::string_view data(PyBytes_AS_STRING(args[0]),
                        static_cast<std::size_t>(PyBytes_GET_SIZE(args[0])));
  StatusOr<PickleShape> shape = WalkPickle(data, max_bytes);
  if (shape.ok()) return PyBool_FromLong(*shape == PickleShape::kPlain ? 1 : 0);
  PyObject* pickle = PyImport_ImportModule("pickle");
  if (pickle == nullptr) return nullptr;
  PyObject* error = PyObject_GetAttrString(pickle, "UnpicklingError");
  Py_DECREF(pickle);
  if (error == nullptr) return nullptr;
  PyErr_SetString(error, shape.status().message().c_str());
  Py_DECREF(error);
  return nullptr;
}

PyMethodDef kPlainPickleDef = {
    "plain_pickle", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&PlainPickle)),
    METH_FASTCALL,
    "Whether a pickle builds only plain data (names nothing, calls nothing)."};
PyMethodDef kCheckPickleDef = {
    "check_pickle", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&CheckPickle)),
    METH_FASTCALL,
    "Walks a session's pickle within a budget of max_bytes: whether it is plain, or "
    "pickle.UnpicklingError saying why it is refused."};

void AddFunction(pybind11::module_& m, PyMethodDef* def) {
  PyObject* function = PyCFunction_NewEx(def, nullptr, m.ptr());
  if (function == nullptr) throw pybind11::error_already_set();
  if (PyModule_AddObject(m.ptr(), def->ml_name, function) != 0) {
    Py_DECREF(function);
    throw pybind11::error_already_set();
  }
}

}  // namespace

void BindPlainPickle(pybind11::module_& m) {
  AddFunction(m, &kPlainPickleDef);
  AddFunction(m, &kCheckPickleDef);
  m.def("safe_pickle_globals", [] { return SafePickleGlobals(); },
        "The (module, name) pairs a session's pickle may name when unpickle='safe'.");
}

}  // namespace dolsot::bindings
