// The Python face of a session's pickle walk (pickle_budget.h): whether a
// pickle builds only plain data, so the host can decode it with pickle.loads
// instead of its allow-list unpickler (which must read through a file object
// and costs a few microseconds a call: a tool's arguments are on a cell's
// path), and whether it stays within the host's budget.
//
// Plain means every opcode, walked to STOP, is one of the binary opcodes that
// make builtin values without naming anything: no GLOBAL / STACK_GLOBAL /
// INST / OBJ / EXT*, none that calls what is on the stack (REDUCE, BUILD,
// NEWOBJ*), no persistent ids, no out-of-band buffers, none of protocol 0's
// text opcodes. Without a name, a pickle can reach no callable, so loading it
// runs no code of its choosing. Anything else, or anything malformed, is "not
// plain": the walk may only ever err towards the slow path.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string_view>

namespace dolsot::bindings {

bool IsPlainPickle(std::string_view data);

// _dolsot.plain_pickle(data: bytes) -> bool,
// _dolsot.check_pickle(data: bytes, max_bytes: int) -> bool (plain; raises
// pickle.UnpicklingError saying why it is refused), both METH_FASTCALL, and
// _dolsot.safe_pickle_globals() -> list of (module, name).
void BindPlainPickle(pybind11::module_& m);

}  // namespace dolsot::bindings
