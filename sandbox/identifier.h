// Identifier normalization as CPython does it (PEP 3131: NFKC), restricted to
// what the gate needs: the ASCII spelling a non-ASCII identifier stands for.
#pragma once

#include <string>
#include <string_view>

namespace dolsot::sandbox {

// Returns `text` itself when it is ASCII. Otherwise writes into `scratch` the
// identifier with every code point whose NFKC form is ASCII replaced by that
// form (`ｅｖａｌ` -> `eval`, `ℯ𝓍ℯ𝒸` -> `exec`) and returns a view of it.
// Code points whose NFKC form is not ASCII are kept: the result then cannot
// equal any ASCII name, exactly as in CPython. `text` must be valid UTF-8.
std::string_view NormalizeIdentifier(std::string_view text, std::string& scratch);

}  // namespace dolsot::sandbox
