// PickleBudget: what a session's pickle would build in the host, worked out
// before anything is built, so a small pickle cannot become a big value.
//
// The walk runs the pickle machine over abstract values: it knows each
// value's kind and size (a str's length, a list's element count, a range's
// length, an int's bits) but builds nothing. Every opcode charges what the
// real unpickler would allocate or touch for it (a value pushed, a
// container's slot, a memo slot, a key hashed), and a call of an allowed
// constructor (REDUCE, NEWOBJ) charges what that constructor would build from
// the arguments it is given (`list(range(n))`: n slots and n ints;
// `bytes(n)`: n bytes) before the unpickler could call it. A walk that would
// go over the budget, or that meets a shape it cannot cost (a name outside
// the allow-list, a call whose argument it cannot size, a declared length
// past the data's end, nesting deeper than kMaxPickleDepth), is refused: the
// walk errs towards refusing, never towards building.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace dolsot {

// What a walked pickle does when it is loaded.
enum class PickleShape : std::uint8_t {
  kPlain,  // names nothing: builds only builtin values (pickle.loads may decode it)
  kNamed,  // names allowed constructors (decode it with the allow-list unpickler)
};

// How deep a session's value may nest (Python's default recursion limit:
// the session's own pickler cannot write a deeper one).
inline constexpr std::uint32_t kMaxPickleDepth = 1000;

// The default budget of a decode (bytes): sized for answers and tool arguments.
inline constexpr std::uint64_t kDefaultPickleBudget = std::uint64_t{64} << 20;

// Walks `data` and answers its shape, or a Status (kInvalidArgument) whose
// message says why it is refused: over `max_bytes`, a name outside the
// allow-list, a shape the walk cannot cost, or malformed data.
StatusOr<PickleShape> WalkPickle(std::string_view data, std::uint64_t max_bytes);

// The names a session's pickle may use: (module, name) pairs of constructors
// of plain data, each costed by the walk.
const std::vector<std::pair<std::string, std::string>>& SafePickleGlobals();

// Whether `data` builds only plain data: every opcode, walked to STOP, is one
// of the binary opcodes that make builtin values without naming anything (no
// GLOBAL / STACK_GLOBAL / INST / OBJ / EXT*, nothing that calls what is on the
// stack: REDUCE, BUILD, NEWOBJ*; no persistent ids, no out-of-band buffers,
// none of protocol 0's text opcodes). Without a name a pickle reaches no
// callable, so loading it runs no code of its choosing and imports nothing.
// Anything else, or anything malformed, is "not plain": the answer only ever
// errs towards false.
bool IsPlainPickle(std::string_view data);

}  // namespace dolsot
