// The other Python threads of a session process: named (threading's names,
// or how they were started) or only counted, by a walk of thread states.
#include <Python.h>

#include "backend_subprocess/session_threads.h"

#include <set>

#include "embedded/interned_name.h"

namespace dolsot {
namespace {

// Calls `visit` with each thread state of this interpreter but the
// calling thread's, while it returns true. Needs the GIL.
template <typename Visit>
void ForEachOtherThreadState(Visit&& visit) {
  PyThreadState* self = PyThreadState_Get();
  for (PyThreadState* t = PyInterpreterState_ThreadHead(PyThreadState_GetInterpreter(self));
       t != nullptr; t = PyThreadState_Next(t)) {
    if (t != self && !visit(t)) return;
  }
}

}  // namespace

std::vector<std::string> LiveThreadNames() {
  static constinit const InternedName kThreading("threading");
  static constinit const InternedName kActive("_active");
  static constinit const InternedName kName("name");
  std::vector<std::string> names;
  if (!OtherPythonThreads()) return names;  // the common case, without a lookup
  std::set<unsigned long> listed;  // the idents threading knows
  PyObject* module_name = kThreading.get();
  PyObject* threading = module_name ? PyImport_GetModule(module_name) : nullptr;
  PyObject* active_name = kActive.get();
  PyObject* active = threading && active_name ? PyObject_GetAttr(threading, active_name) : nullptr;
  if (active != nullptr && PyDict_Check(active) && PyDict_GET_SIZE(active) > 1) {
    unsigned long self = PyThread_get_thread_ident();
    PyObject *key, *thread;
    Py_ssize_t pos = 0;
    while (PyDict_Next(active, &pos, &key, &thread) && names.size() < 16) {
      const unsigned long ident = PyLong_AsUnsignedLong(key);
      listed.insert(ident);
      if (ident == self) continue;
      PyObject* name_key = kName.get();
      PyObject* name = name_key != nullptr ? PyObject_GetAttr(thread, name_key) : nullptr;
      const char* text = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : nullptr;
      if (text != nullptr) names.emplace_back(std::string(text).substr(0, 64));
      Py_XDECREF(name);
    }
  }
  PyErr_Clear();
  Py_XDECREF(active);
  Py_XDECREF(threading);
  ForEachOtherThreadState([&](PyThreadState* t) {
    if (listed.count(t->thread_id) == 0) names.emplace_back("a thread not started by threading");
    return names.size() < 16;
  });
  return names;
}

bool OtherPythonThreads() {
  bool found = false;
  ForEachOtherThreadState([&](PyThreadState*) {
    found = true;
    return false;  // one is enough
  });
  return found;
}

}  // namespace dolsot
