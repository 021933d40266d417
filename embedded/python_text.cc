// Utf8View: CPython's cached UTF-8, or an encoding that keeps lone surrogates;
// a str and an exception as text for a reader.
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

std::string Utf8ForReader(PyObject* str) {
  std::string storage;
  std::optional<std::string_view> text = Utf8View(str, LoneSurrogates::kBackslashEscape, storage);
  if (!text) {
    PyErr_Clear();
    return "";
  }
  return std::string(*text);
}

std::string ShortExceptionText(PyObject* exc) {
  std::string out = Py_TYPE(exc)->tp_name;
  PyObject* text = PyObject_Str(exc);
  if (text == nullptr) {
    PyErr_Clear();
    return out;
  }
  std::string message = Utf8ForReader(text);
  Py_DECREF(text);
  if (!message.empty()) out += ": " + message;
  return out;
}

void ForEachStrKey(PyObject* dict, const std::function<bool(std::string_view)>& visit) {
  PyObject *key = nullptr, *value = nullptr;  // borrowed
  Py_ssize_t position = 0;
  while (PyDict_Next(dict, &position, &key, &value)) {
    if (!PyUnicode_Check(key)) continue;
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(key, &size);
    if (data == nullptr) {
      PyErr_Clear();
      continue;
    }
    if (!visit(std::string_view(data, static_cast<std::size_t>(size)))) return;
  }
}

}  // namespace dolsot
