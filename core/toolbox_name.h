// What a toolbox alias and a toolbox module name may be: one rule for every
// door (Repl, InProcessSession, the CLI's --toolbox, the Python package), so
// none accepts a name another refuses.
#pragma once

#include <string_view>

#include "core/status.h"

namespace dolsot {

// An alias is an ASCII Python identifier that is not a keyword and does not
// start with "__" (dunder names are the interpreter's). ASCII only: a cell's
// identifiers are NFKC-folded by CPython, and an alias must read one way.
// kInvalidToolbox naming the alias otherwise.
Status ValidateToolboxAlias(std::string_view alias);

// A module name is dot-separated ASCII identifiers ("pkg.sub"), none a
// keyword. kInvalidToolbox naming the alias and the module otherwise.
Status ValidateToolboxModule(std::string_view alias, std::string_view module);

}  // namespace dolsot
