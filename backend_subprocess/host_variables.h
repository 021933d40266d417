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
  // others from what this process kept. `*changed` says whether any name
  // now holds another object than before (a kept value the name still
  // holds is not bound again: nothing changes, and the cell may still be
  // proven, read_only_cell.h). kCorrupt naming the variable when a pickle
  // does not load or a value is not kept; kInternal when binding fails.
  // Needs the GIL.
  Status Bind(PyObject* globals, const std::vector<ReceivedVariable>& variables, bool* changed);

 private:
  PyObject* cache_ = nullptr;  // name -> the value last received (a dict; lives with the process)
};

}  // namespace dolsot
