// Utf8View: CPython's cached UTF-8, or an encoding that keeps lone surrogates.
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "embedded/python_text.h"

namespace dolsot {

std::optional<std::string_view> Utf8View(PyObject* text, LoneSurrogates surrogates,
                                         std::string& storage) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text, &size);
  if (data != nullptr) return std::string_view(data, static_cast<std::size_t>(size));
  PyErr_Clear();  // a lone surrogate (or not a str)
  if (surrogates == LoneSurrogates::kRefuse) return std::nullopt;
  const char* errors = surrogates == LoneSurrogates::kPass ? "surrogatepass" : "backslashreplace";
  PyObject* encoded = PyUnicode_AsEncodedString(text, "utf-8", errors);
  if (encoded == nullptr) return std::nullopt;
  storage.assign(PyBytes_AS_STRING(encoded), static_cast<std::size_t>(PyBytes_GET_SIZE(encoded)));
  Py_DECREF(encoded);
  return std::string_view(storage);
}

}  // namespace dolsot
