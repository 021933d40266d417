// In a session process being restored: the journal a stored checkpoint
// carries after its base (checkpoint_journal.h), bound over the base.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend_subprocess/checkpoint_journal.h"

namespace dolsot {

// Binds `split`'s journal over the base just restored into `globals`: its
// last delta frame (the base's values of the names it kept, and its own
// blob's; every other name of the base goes), then the binding cells'
// values. `restored` and `failed` (the base's) become the state's, and
// `cells_run` the journal's count when later. Returns what went wrong (the
// state then stops where it did), or "". Needs the GIL.
std::string ApplyJournal(PyObject* globals, const SplitCheckpoint& split,
                         std::vector<std::string>& restored, std::vector<std::string>& failed,
                         std::uint64_t& cells_run);

}  // namespace dolsot
