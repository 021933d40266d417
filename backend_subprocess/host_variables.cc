// HostVariables: binds the variables of a RUN frame, keeping each value for
// the cells that name it again without resending it.
#include "backend_subprocess/host_variables.h"

#include "embedded/cell_tools.h"
#include "embedded/plain_values.h"

namespace dolsot {

namespace {

constexpr int kMaxPlainItems = 4096;  // what a plain check walks, per variable

// Whether letting `held` go (a name's value before it is bound anew) and
// binding `value` in its place is plain data replacing plain data.
bool PlainRebinding(PyObject* held, PyObject* value) {
  int budget = kMaxPlainItems;
  if (held != nullptr && !IsAtom(held, &budget)) return false;
  budget = kMaxPlainItems;
  return IsAtom(value, &budget);
}

}  // namespace

void HostVariables::Forget() {
  if (cache_ != nullptr) PyDict_Clear(cache_);
}

Status HostVariables::Bind(PyObject* globals, const std::vector<ReceivedVariable>& variables,
                           bool* changed, std::vector<std::string>* plain) {
  *changed = false;
  plain->clear();
  if (variables.empty()) return Status::Ok();
  if (cache_ == nullptr && (cache_ = PyDict_New()) == nullptr) {
    PyErr_Clear();
    return Status(ErrorCode::kInternal, "out of memory");
  }
  for (const ReceivedVariable& v : variables) {
    PyObject* value = nullptr;
    bool loaded_plainly = true;  // loading it ran no code
    if (v.resent) {
      StatusOr<PyObject*> loaded = UnpickleFromHost(v.pickle, &loaded_plainly);
      if (!loaded.ok()) {
        return Status(ErrorCode::kCorrupt,
                      "variable '" + v.name + "': " + loaded.status().message());
      }
      value = *loaded;
      int stored = PyDict_SetItemString(cache_, v.name.c_str(), value);
      if (stored < 0) PyErr_Clear();
    } else {
      value = Py_XNewRef(PyDict_GetItemString(cache_, v.name.c_str()));
      if (value == nullptr) {
        return Status(ErrorCode::kCorrupt, "variable '" + v.name +
                                               "' was not sent again and this session "
                                               "does not hold it; run the cell again");
      }
    }
    // Kept and still held: binding it again would change nothing.
    if (!v.resent && PyDict_GetItemString(globals, v.name.c_str()) == value) {
      Py_DECREF(value);
      continue;
    }
    PyObject* held = PyDict_GetItemString(globals, v.name.c_str());  // borrowed
    if (loaded_plainly && PlainRebinding(held, value)) {
      plain->push_back(v.name);
    } else {
      *changed = true;
    }
    int bound = PyDict_SetItemString(globals, v.name.c_str(), value);
    Py_DECREF(value);
    if (bound < 0) {
      PyErr_Clear();
      return Status(ErrorCode::kInternal, "cannot bind variable '" + v.name + "'");
    }
  }
  return Status::Ok();
}

}  // namespace dolsot
