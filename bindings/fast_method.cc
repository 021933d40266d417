// Per-cell methods without pybind11's dispatcher (see fast_method.h).
#include "bindings/fast_method.h"

#include <array>

#include "embedded/python_text.h"

namespace py = pybind11;

namespace dolsot::bindings {
namespace {

constexpr std::array<const char*, 6> kRunParameters = {"session_id", "code",      "timeout",
                                                     "variables",  "on_output", "on_image"};

[[noreturn]] void RaiseTypeError(const std::string& message) {
  PyErr_SetString(PyExc_TypeError, message.c_str());
  throw py::error_already_set();
}

std::string TypeName(PyObject* obj) { return Py_TYPE(obj)->tp_name; }

// The UTF-8 bytes of `text` (a str), passing a lone surrogate through with
// surrogatepass into `storage`.
std::string_view Utf8Of(PyObject* text, std::string& storage) {
  std::optional<std::string_view> utf8 = Utf8View(text, LoneSurrogates::kPass, storage);
  if (!utf8) throw py::error_already_set();
  return *utf8;
}

}  // namespace

void ParseRunArguments(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                       RunArguments& out) {
  std::array<PyObject*, kRunParameters.size()> given{};
  if (nargs > 2) {
    RaiseTypeError("run() takes 2 positional arguments but " + std::to_string(nargs) +
                   " were given");
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) given[static_cast<std::size_t>(i)] = args[i];
  Py_ssize_t keywords = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < keywords; ++k) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, k);
    std::size_t index = 0;
    while (index < kRunParameters.size() &&
           PyUnicode_CompareWithASCIIString(name, kRunParameters[index]) != 0) {
      ++index;
    }
    if (index == kRunParameters.size()) {
      std::string unused;
      RaiseTypeError("run() got an unexpected keyword argument '" +
                     std::string(Utf8Of(name, unused)) + "'");
    }
    if (given[index] != nullptr) {
      RaiseTypeError(std::string("run() got multiple values for argument '") +
                     kRunParameters[index] + "'");
    }
    given[index] = args[nargs + k];
  }
  for (std::size_t i = 0; i < 2; ++i) {
    if (given[i] == nullptr) {
      RaiseTypeError(std::string("run() missing required argument '") + kRunParameters[i] + "'");
    }
    if (!PyUnicode_Check(given[i])) {
      RaiseTypeError(std::string("run() argument '") + kRunParameters[i] + "' must be str, not " +
                     TypeName(given[i]));
    }
  }
  out.session_id = Utf8Of(given[0], out.session_id_storage);
  out.code = Utf8Of(given[1], out.code_storage);
  out.timeout.reset();
  if (given[2] != nullptr && given[2] != Py_None) {
    double seconds = PyFloat_AsDouble(given[2]);  // what has __float__ or __index__
    if (seconds == -1.0 && PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
      PyErr_Clear();
      RaiseTypeError("run() argument 'timeout' must be a number or None, not " +
                     TypeName(given[2]));
    }
    out.timeout = seconds;
  }
  out.variables = nullptr;
  if (given[3] != nullptr && given[3] != Py_None) {
    if (!PyDict_Check(given[3])) {
      RaiseTypeError("run() argument 'variables' must be a dict of names to values or None, "
                     "not " + TypeName(given[3]));
    }
    out.variables = given[3];
  }
  PyObject** callbacks[] = {&out.on_output, &out.on_image};
  for (std::size_t i = 0; i < 2; ++i) {
    PyObject* callback = given[4 + i];
    *callbacks[i] = nullptr;
    if (callback == nullptr || callback == Py_None) continue;
    if (!PyCallable_Check(callback)) {
      RaiseTypeError(std::string("run() argument '") + kRunParameters[4 + i] +
                     "' must be a callable or None, not " + TypeName(callback));
    }
    *callbacks[i] = callback;
  }
}

void AddFastMethod(py::handle cls, PyMethodDef* def) {
  PyObject* descriptor = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), def);
  if (descriptor == nullptr) throw py::error_already_set();
  cls.attr(def->ml_name) = py::reinterpret_steal<py::object>(descriptor);
}

}  // namespace dolsot::bindings
