// What a checkpoint asks of a session's names and values: a name's UTF-8,
// dunders, cell definitions, pickle's "cannot pickle" error.
#include "backend_subprocess/checkpoint_values.h"

#include <string>

#include "embedded/py_ref.h"
#include "embedded/python_text.h"

namespace dolsot {
namespace checkpoint_values {

std::optional<std::string_view> Utf8(PyObject* text) {
  if (!PyUnicode_Check(text)) return std::nullopt;
  std::string unused;  // kRefuse never encodes into it
  return Utf8View(text, LoneSurrogates::kRefuse, unused);
}

bool IsDunder(std::string_view name) {
  return name.size() >= 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__";
}

bool PendingIsCannotPickle() {
  if (!PyErr_ExceptionMatches(PyExc_TypeError)) return false;
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  bool match = false;
  if (value != nullptr) {
    Ref text(PyObject_Str(value));
    std::optional<std::string_view> message = text ? Utf8(text.get()) : std::nullopt;
    match = message && message->substr(0, 13) == "cannot pickle";
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  PyErr_Clear();
  return match;
}

bool IsMainDefinition(PyObject* value) {
  if (!PyType_Check(value) && !PyFunction_Check(value)) return false;
  Ref module(PyObject_GetAttrString(value, "__module__"));
  if (!module) {
    PyErr_Clear();
    return false;
  }
  std::optional<std::string_view> text = Utf8(module.get());
  return text && *text == "__main__";
}

}  // namespace checkpoint_values
}  // namespace dolsot
