// The _dolsot extension module: wires every bind_*.cc file into one module.
#include <pybind11/pybind11.h>

#include "bindings/bindings.h"
#include "bindings/plain_pickle.h"

PYBIND11_MODULE(_dolsot, m) {
  m.doc() = "dolsot's C++ core (use the dolsot package, not this module)";
  dolsot::bindings::BindErrors(m);
  dolsot::bindings::BindCore(m);
  dolsot::bindings::BindStores(m);
  dolsot::bindings::BindSandbox(m);
  dolsot::bindings::BindBackend(m);
  dolsot::bindings::BindInProcess(m);
  dolsot::bindings::BindRepl(m);
  dolsot::bindings::BindPlainPickle(m);
}
