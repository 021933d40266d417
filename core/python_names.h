// Python's own names, once for every part: the hard keywords and the public
// names of the builtins module, for Python 3.10 to 3.13 (the union: a name
// one of them has counts, so a toolbox alias or a rebinding check never
// depends on which interpreter runs the cell).
#pragma once

#include <string_view>

namespace dolsot {

// A hard keyword (keyword.kwlist), True, False and None included.
bool IsPythonKeyword(std::string_view name);
// A public name of the builtins module (dir(builtins) without dunders).
bool IsPythonBuiltinName(std::string_view name);
// An ASCII identifier ([A-Za-z_][A-Za-z0-9_]*), keywords included: the shape
// every name dolsot binds in a session (toolbox aliases, tools, variables)
// must have, so it reads one way whatever CPython's NFKC folding does.
bool IsAsciiIdentifier(std::string_view name);

}  // namespace dolsot
