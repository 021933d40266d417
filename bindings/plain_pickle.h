// The Python face of a session's pickle walk (core/pickle_budget.h): whether a
// pickle builds only plain data, so the host can decode it with pickle.loads
// instead of its allow-list unpickler (which must read through a file object
// and costs a few microseconds a call: a tool's arguments are on a cell's
// path), and whether it stays within the host's budget.
//
// (what "plain" means: IsPlainPickle there).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string_view>

namespace dolsot::bindings {

// _dolsot.plain_pickle(data: bytes) -> bool,
// _dolsot.check_pickle(data: bytes, max_bytes: int) -> bool (plain; raises
// pickle.UnpicklingError saying why it is refused), both METH_FASTCALL, and
// _dolsot.safe_pickle_globals() -> list of (module, name).
void BindPlainPickle(pybind11::module_& m);

}  // namespace dolsot::bindings
