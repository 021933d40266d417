// The cell proofs' quick looks (read_only_cell.h): linear scans of a
// cell's bytes that turn away, in about a microsecond, most cells a proof
// would refuse, before Python's parser (30-150 us) is asked, so a cell that
// takes the general path pays only this. Each never says no to a cell its
// proof would pass, except where its crude view of strings sees code in
// one (a false "no" only costs the fast path); what it lets through, the
// proof decides. No Python here.
#pragma once

#include <span>
#include <string_view>

namespace dolsot {

// For the read-only proof: no statement, assignment, attribute, block,
// lambda or import.
bool MayBeReadOnly(std::string_view code);

// For the binding proof: no word that imports, deletes, makes a class,
// declares a name global, handles an exception, returns, yields
// or awaits; no attribute but a method of BindingMethods; no decorator or
// `:=`; in the code the cell runs (the lines of a def's body are skipped:
// defining a function runs none of it).
bool MayBind(std::string_view code);

// The methods a binding cell (and a proven function's body) may call on
// any value: on the builtin values the proof lets it reach they change
// only the value they are called on (list.append, dict.update, set.add) or
// nothing (str.split, dict.get). Left out: format and format_map
// (attribute reads through a format string), encode and decode (a codec
// lookup may import).
bool IsBindingMethod(std::string_view word);
std::span<const char* const> BindingMethods();

}  // namespace dolsot
