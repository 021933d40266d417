// HostVariables: the variables a host sends with a cell (RunOptions'
// variables), bound in the session and kept so a value the host does not
// send again is bound from this process's own copy.
#pragma once

#include <Python.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dolsot {

// One variable of a RUN frame.
struct ReceivedVariable {
  std::string name;
  bool resent = false;      // else: the value this session received last time
  std::string_view pickle;  // valid while the RUN frame lives
};

class HostVariables {
 public:
  HostVariables() = default;
  HostVariables(const HostVariables&) = delete;
  HostVariables& operator=(const HostVariables&) = delete;

  // Binds `variables` in `globals`: a resent one unpickled (and kept), the
  // others from what this process kept. A kept value the name still holds
  // is not bound again: nothing changes. A name bound anew goes to
  // `*plain` when what it binds is plain data (a resent pickle that names
  // nothing, so loading it ran no code; a kept value of plain values all
  // the way down) and what it held was nothing or such data too (letting
  // it go runs no code): a cell may still be proven with it, its value
  // then one of the cell's bindings (read_only_cell.h). `*changed` says
  // whether any other name now holds another object than before. kCorrupt
  // naming the variable when a pickle does not load or a value is not
  // kept; kInternal when binding fails. Needs the GIL.
  Status Bind(PyObject* globals, const std::vector<ReceivedVariable>& variables, bool* changed,
              std::vector<std::string>* plain);

  // Lets every kept value go: the session they came with ended (a runner
  // made a new session again in place), and the host sends the next one's
  // afresh. Needs the GIL.
  void Forget();

 private:
  PyObject* cache_ = nullptr;  // name -> the value last received (a dict; lives with the process)
};

}  // namespace dolsot
