// The per-thread tree-sitter parser for Python.
#include "sandbox/tree_sitter_handles.h"

#include <cstdlib>

namespace dolsot::sandbox {

TSParser* ThreadPythonParser() {
  thread_local ParserPtr parser = [] {
    ParserPtr p(ts_parser_new());
    // A parser whose language cannot be set is a build defect (ABI mismatch
    // between core and grammar), never a property of the input.
    if (!p || !ts_parser_set_language(p.get(), tree_sitter_python())) std::abort();
    return p;
  }();
  return parser.get();
}

}  // namespace dolsot::sandbox
