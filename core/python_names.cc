// The keyword and builtin tables (sorted; looked up by binary search).
#include "core/python_names.h"

#include <algorithm>
#include <iterator>

#include "core/python_chars.h"

namespace dolsot {
namespace {

constexpr std::string_view kKeywords[] = {
    "False", "None",   "True",  "and",    "as",       "assert", "async",  "await",
    "break", "class",  "continue", "def", "del",      "elif",   "else",   "except",
    "finally", "for",  "from",  "global", "if",       "import", "in",     "is",
    "lambda", "nonlocal", "not", "or",    "pass",     "raise",  "return", "try",
    "while", "with",   "yield",
};

constexpr std::string_view kBuiltins[] = {
    "ArithmeticError", "AssertionError", "AttributeError", "BaseException",
    "BaseExceptionGroup", "BlockingIOError", "BrokenPipeError", "BufferError",
    "BytesWarning", "ChildProcessError", "ConnectionAbortedError", "ConnectionError",
    "ConnectionRefusedError", "ConnectionResetError", "DeprecationWarning", "EOFError",
    "Ellipsis", "EncodingWarning", "EnvironmentError", "Exception", "ExceptionGroup",
    "False", "FileExistsError", "FileNotFoundError", "FloatingPointError", "FutureWarning",
    "GeneratorExit", "IOError", "ImportError", "ImportWarning", "IndentationError",
    "IndexError", "InterruptedError", "IsADirectoryError", "KeyError", "KeyboardInterrupt",
    "LookupError", "MemoryError", "ModuleNotFoundError", "NameError", "None",
    "NotADirectoryError", "NotImplemented", "NotImplementedError", "OSError",
    "OverflowError", "PendingDeprecationWarning", "PermissionError", "ProcessLookupError",
    "PythonFinalizationError", "RecursionError", "ReferenceError", "ResourceWarning",
    "RuntimeError", "RuntimeWarning", "StopAsyncIteration", "StopIteration", "SyntaxError",
    "SyntaxWarning", "SystemError", "SystemExit", "TabError", "TimeoutError", "True",
    "TypeError", "UnboundLocalError", "UnicodeDecodeError", "UnicodeEncodeError",
    "UnicodeError", "UnicodeTranslateError", "UnicodeWarning", "UserWarning", "ValueError",
    "Warning", "ZeroDivisionError", "abs", "aiter", "all", "anext", "any", "ascii", "bin",
    "bool", "breakpoint", "bytearray", "bytes", "callable", "chr", "classmethod", "compile",
    "complex", "copyright", "credits", "delattr", "dict", "dir", "divmod", "enumerate",
    "eval", "exec", "exit", "filter", "float", "format", "frozenset", "getattr", "globals",
    "hasattr", "hash", "help", "hex", "id", "input", "int", "isinstance", "issubclass",
    "iter", "len", "license", "list", "locals", "map", "max", "memoryview", "min", "next",
    "object", "oct", "open", "ord", "pow", "print", "property", "quit", "range", "repr",
    "reversed", "round", "set", "setattr", "slice", "sorted", "staticmethod", "str", "sum",
    "super", "tuple", "type", "vars", "zip",
};

static_assert(std::ranges::is_sorted(kKeywords));
static_assert(std::ranges::is_sorted(kBuiltins));

template <std::size_t N>
bool Contains(const std::string_view (&table)[N], std::string_view name) {
  return std::binary_search(std::begin(table), std::end(table), name);
}

}  // namespace

bool IsPythonKeyword(std::string_view name) { return Contains(kKeywords, name); }
bool IsPythonBuiltinName(std::string_view name) { return Contains(kBuiltins, name); }

bool IsAsciiIdentifier(std::string_view name) {
  return !name.empty() && IsAsciiNameStart(name[0]) &&
         std::all_of(name.begin() + 1, name.end(), IsAsciiNameChar);
}

}  // namespace dolsot
