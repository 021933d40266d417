// Python callables as OutputCallbacks (see output_callbacks_from_python.h).
#include "bindings/output_callbacks_from_python.h"

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

namespace dolsot::bindings {
namespace {

// What both callables of one run() share: whether one raised already.
struct RunLog {
  std::atomic<bool> logged{false};
};

// Logs the pending exception (cleared) the first time one of the run's
// callables raises; later ones are dropped silently. Needs the GIL.
void LogOnce(RunLog& log, const char* name) {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  if (log.logged.exchange(true)) {
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return;
  }
  PyErr_NormalizeException(&type, &value, &traceback);
  PyObject* logging = PyImport_ImportModule("logging");
  PyObject* logger = logging != nullptr ? PyObject_CallMethod(logging, "getLogger", "s", "dolsot")
                                        : nullptr;
  PyObject* exc_info = PyTuple_Pack(3, type != nullptr ? type : Py_None,
                                    value != nullptr ? value : Py_None,
                                    traceback != nullptr ? traceback : Py_None);
  if (logger != nullptr && exc_info != nullptr) {
    std::string message = std::string(name) +
                          " raised; the cell goes on (this is logged once per run, later "
                          "errors are not)";
    PyObject* args = Py_BuildValue("(s)", message.c_str());
    PyObject* kwargs = Py_BuildValue("{s:O}", "exc_info", exc_info);
    PyObject* error = args != nullptr && kwargs != nullptr
                          ? PyObject_GetAttrString(logger, "error")
                          : nullptr;
    PyObject* done = error != nullptr ? PyObject_Call(error, args, kwargs) : nullptr;
    Py_XDECREF(done);
    Py_XDECREF(error);
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
  }
  PyErr_Clear();  // a logging failure is not the cell's
  Py_XDECREF(exc_info);
  Py_XDECREF(logger);
  Py_XDECREF(logging);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
}

// One callable, kept alive by every copy of the std::function around it.
class PythonCallback {
 public:
  PythonCallback(PyObject* callable, const char* name, std::shared_ptr<RunLog> log)
      : callable_(Py_NewRef(callable)), name_(name), log_(std::move(log)) {}
  ~PythonCallback() {
    if (!Py_IsInitialized()) return;  // finalized: nothing to drop
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_DECREF(callable_);
    PyGILState_Release(gil);
  }
  PythonCallback(const PythonCallback&) = delete;
  PythonCallback& operator=(const PythonCallback&) = delete;

  // text: str (invalid UTF-8 replaced; a session process runs user code);
  // otherwise bytes.
  void Call(std::string_view data, bool text) {
    if (!Py_IsInitialized()) return;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject* argument =
        text ? PyUnicode_DecodeUTF8(data.data(), static_cast<Py_ssize_t>(data.size()), "replace")
             : PyBytes_FromStringAndSize(data.data(), static_cast<Py_ssize_t>(data.size()));
    PyObject* returned =
        argument != nullptr ? PyObject_CallOneArg(callable_, argument) : nullptr;
    if (returned == nullptr) LogOnce(*log_, name_);
    Py_XDECREF(returned);
    Py_XDECREF(argument);
    PyGILState_Release(gil);
  }

 private:
  PyObject* callable_;
  const char* name_;
  std::shared_ptr<RunLog> log_;
};

}  // namespace

OutputCallbacks OutputCallbacksFromPython(PyObject* on_output, PyObject* on_image) {
  OutputCallbacks callbacks;
  if (on_output == nullptr && on_image == nullptr) return callbacks;
  auto log = std::make_shared<RunLog>();
  if (on_output != nullptr) {
    auto callback = std::make_shared<PythonCallback>(on_output, "on_output", log);
    callbacks.on_output = [callback](std::string_view text) { callback->Call(text, true); };
  }
  if (on_image != nullptr) {
    auto callback = std::make_shared<PythonCallback>(on_image, "on_image", log);
    callbacks.on_image = [callback](std::string_view png) { callback->Call(png, false); };
  }
  return callbacks;
}

}  // namespace dolsot::bindings
