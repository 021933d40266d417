// PlainExpressions: the read-only proof's shape (read_only_cell.h) for the
// commonest small cells, `1 + 1`, `n * 2`, `len(items), max(t)`, read off
// the bytes in well under a microsecond instead of from Python's parser and
// a walk of its tree (~40 us on the cold caches of an agent's pace: the
// parse, its AST objects, the walk; then the cell is parsed again to
// compile it).
//
// The proof is by alphabet. The cell may hold only:
//   - ASCII names, of which the keywords only `and or not in is None True
//     False`;
//   - number literals that read exactly as one (decimal with an optional
//     fraction, exponent and `j`; `0x`, `0o`, `0b`), followed by neither a
//     name byte nor a `.`;
//   - the operators `+ - * / // % ** << >> & | ^ ~ < > <= >= == !=`, the
//     brackets `( ) [ ] { }`, `,` and `;`, and `:` inside brackets, where
//     the tokens are cut as CPython's tokenizer cuts them (longest first),
//     so `+=`, `<<=`, `:=`, `->`, `...` and `!` alone are refused;
//   - blanks (space, tab, form feed, carriage return), newlines, comments.
// Nothing else: no `=`, `.`, `@`, quote, backslash, non-ASCII byte outside a
// comment. With no `=`, `:=`, `.`, no `:` outside brackets and none of the
// statement keywords, every statement Python can parse from these tokens is
// an expression statement, and its nodes are names read (Load), constants,
// operators, comparisons, `and`/`or`/`not`, calls without keyword
// arguments, starred values, subscripts and slices, and list, tuple, set
// and dict displays: all among the nodes the parsed proof accepts, with
// every name a read. A cell the scan refuses only goes on to the parsed
// proof; a cell it accepts that Python cannot parse fails as a SyntaxError.
#pragma once

#include <string_view>
#include <vector>

namespace dolsot {

// Whether `code` is made only of the tokens above; `*names` gets every name
// it reads (repeats included, views into `code`). No interpreter needed.
bool ScanPlainExpressions(std::string_view code, std::vector<std::string_view>* names);

}  // namespace dolsot
