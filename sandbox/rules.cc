// The rule table and the name tables of the AST gate (see rules.h and
// docs/gate.md for why each entry is here).
#include "sandbox/rules.h"

#include <algorithm>
#include <array>

#include "core/python_names.h"

namespace dolsot::sandbox {
namespace {

constexpr std::array kRules = {
    RuleInfo{Rule::kSyntaxError, "syntax-error",
             "the cell does not parse as Python 3 (fail closed)"},
    RuleInfo{Rule::kInvalidSource, "invalid-source",
             "invalid UTF-8, a NUL byte, a lone carriage return or a non-UTF-8 coding cookie"},
    RuleInfo{Rule::kSourceLimit, "source-limit",
             "the cell is too large or nested too deep to check"},
    RuleInfo{Rule::kImportDenied, "import-denied",
             "import of a module outside the allow-list, a relative or a wildcard import"},
    RuleInfo{Rule::kNameDenied, "name-denied",
             "a builtin that runs code or reaches objects by name (exec, eval, open, getattr, ...)"},
    RuleInfo{Rule::kDunderName, "dunder-name", "a __dunder__ name outside the allowed set"},
    RuleInfo{Rule::kDunderAttribute, "dunder-attribute",
             "a __dunder__ attribute outside the allowed set (__class__, __globals__, ...)"},
    RuleInfo{Rule::kPrivateAttribute, "private-attribute", "a _private attribute"},
    RuleInfo{Rule::kInternalAttribute, "internal-attribute",
             "frame, generator, coroutine, traceback or code-object internals"},
    RuleInfo{Rule::kAttributeDenied, "attribute-denied",
             "an attribute that leads to a module or runs code (.sys, .os, .get_type_hints, ...)"},
    RuleInfo{Rule::kFormatString, "format-string",
             "str.format/format_map on a template the gate cannot see, or one with attribute fields"},
    RuleInfo{Rule::kRebindBuiltin, "rebind-builtin",
             "rebinding or deleting a builtin name at module level (or via global)"},
    RuleInfo{Rule::kRebindToolbox, "rebind-toolbox", "rebinding or deleting a toolbox alias"},
    RuleInfo{Rule::kModuleAssignment, "module-assignment",
             "assigning into, deleting from or mutating a toolbox, an imported module or a table they hold"},
    RuleInfo{Rule::kConstructDenied, "construct-denied",
             "a construct that makes classes or code from data the gate cannot see (type() with "
             "three arguments, the Enum functional API, string annotations, except*, ...)"},
    RuleInfo{Rule::kSlowPattern, "slow-pattern",
             "a literal regular expression with a repeated group holding a repeated item, given "
             "to re: its backtracking can hold the GIL past any deadline"},
    RuleInfo{Rule::kHugeConstant, "huge-constant",
             "a power, shift, factorial or repetition of literals whose result is too big to "
             "compute (C code holding the GIL past any deadline)"},
    RuleInfo{Rule::kDeferredCode, "deferred-code",
             "a yield or await inside a try with handlers or finally, or inside a with body: "
             "its cleanup can run later, on whatever thread collects the object"},
};

// Sorted tables: binary search, and easy to read.
constexpr std::string_view kAlwaysDenied[] = {
    "__build_class__", "__builtins__", "__import__", "__loader__", "__spec__",
    "breakpoint", "compile", "copyright", "credits", "delattr", "eval", "exec", "exit",
    "getattr", "globals", "hasattr", "help", "input", "license", "locals", "open", "quit",
    "setattr", "vars",
};


// Denied as names only: as attributes they are a toolbox's or a record's own
// (`mt.help("top")`, a dataclass field `b.open`); the builtins themselves are
// reachable as attributes only through a module-leading attribute (.bltns).
// `compile` too: the only objects reachable from the default modules with a
// `compile` attribute are re.compile (and 3.10's re.sre_compile.compile),
// both regex compilers; the builtin is reached only through denied
// attributes (.builtins, .bltns). Enumerated on 3.10-3.13 over every default
// module and submodule, classes and module-level instances included.
constexpr std::string_view kDeniedOnlyAsNames[] = {
    "compile", "copyright", "credits", "exit", "help", "input", "license", "open", "quit",
};

// Submodules of allowed packages that reach what the policy denies
// (json.tool holds pathlib.Path and argparse.FileType). The last part of each
// is in kDeniedModuleLeaves, for the fast path.
constexpr std::string_view kDeniedModulePaths[] = {"json.tool"};
constexpr std::string_view kDeniedModuleLeaves[] = {"tool"};

// Methods that change a container in place: called on a table an allowed
// module holds (copy.dispatch_table.update), they change it for the process.
constexpr std::string_view kMutatingMethods[] = {
    "add", "append", "clear", "discard", "extend", "insert", "pop", "popitem", "remove",
    "reverse", "setdefault", "sort", "update",
};

// Frame, generator, coroutine, async generator, traceback, code and Python 2
// function internals: each leads to globals, builtins or bytecode.
constexpr std::string_view kInternalAttributes[] = {
    "ag_await", "ag_code", "ag_frame", "ag_running", "co_code", "co_consts", "co_names",
    "co_varnames", "cr_await", "cr_code", "cr_frame", "cr_origin", "cr_running",
    "f_back", "f_builtins", "f_code", "f_globals", "f_lasti", "f_locals", "f_trace",
    "func_closure", "func_code", "func_defaults", "func_globals", "gi_code", "gi_frame",
    "gi_running", "gi_suspended", "gi_yieldfrom", "im_class", "im_func", "im_self",
    "tb_frame", "tb_lasti", "tb_next",
};

// Modules reachable as attributes of allowed modules (enum.sys, uuid.os,
// json.codecs, ...), methods that evaluate strings or run commands, and
// allowed-module functions that write attributes of the cell's choosing into
// an object they are given, which may be a module or the toolbox:
// functools.update_wrapper / functools.wraps copy a function's __dict__ into
// their first argument; enum.global_enum writes an enum's members into the
// module its __module__ names.
// Also what evaluates strings for the cell (typing.ForwardRef, evaluated by
// singledispatch's `register`; make_dataclass's namespace and field names),
// `register` (abc's virtual subclasses, singledispatch), and `obj`
// (AttributeError.obj hands back the object a lookup failed on).
// Metaclasses (`ABCMeta`, `EnumMeta`, `EnumType`): calling one makes a class
// from a dict the gate cannot see; `mro` hands back base classes as values;
// `fget` / `fset` / `fdel` hand back a property's functions, which then take
// any object as `self` (see docs/gate.md, "The cell's own classes").
// io's ways to files (`FileIO`, `open_code`, 3.10's `OpenWrapper`; `io.open`
// is refused by the io rule, `open` being a common field name) and csv's
// process-wide settings (`register_dialect`, `unregister_dialect`,
// `field_size_limit`: every csv reader of the host would change).
constexpr std::string_view kDeniedAttributes[] = {
    "ABCMeta", "EnumMeta", "EnumType", "FileIO", "FileType", "ForwardRef", "OpenWrapper", "argparse", "asyncio", "atexit", "bdb", "bltns", "builtins", "chdir", "codecs", "concurrent",
    "copyreg", "ctypes", "doctest", "evaluate_forward_ref", "fcntl", "fdel", "fget", "field_size_limit", "fset", "ftplib", "gc", "get_field", "get_type_hints", "glob",
    "global_enum", "http", "importlib", "inspect", "io", "keyword", "linecache", "logging",
    "make_dataclass", "marshal",
    "mmap", "modules", "mro", "multiprocessing", "nt", "obj", "open_code", "operator", "os", "pathlib", "pdb",
    "pickle", "platform", "popen", "posix", "pty", "register", "register_dialect", "resource", "runpy", "select",
    "selectors", "shutil", "signal", "site", "smtplib", "socket", "spawnv", "ssl",
    "subprocess", "sys", "sysconfig", "system", "tarfile", "tempfile", "threading",
    "tokenize", "traceback", "types", "unregister_dialect", "update_wrapper", "urllib", "vformat", "warnings",
    "weakref", "webbrowser", "wraps", "zipfile", "zipimport",
};

// Pure computation, no file system, process, network or introspection
// (operator, string, inspect, types, sys, os, pickle are deliberately out;
// io only as `io.StringIO` / `io.BytesIO` and constants, see IsAllowedIoAttribute).
constexpr std::string_view kDefaultAllowedModules[] = {
    "__future__", "abc", "array", "base64", "binascii", "bisect", "calendar", "cmath",
    "collections", "colorsys", "contextlib", "copy", "csv", "dataclasses", "datetime", "decimal",
    "difflib", "enum", "fractions", "functools", "hashlib", "heapq", "html", "io", "itertools",
    "json", "math", "numbers", "pprint", "random", "re", "statistics", "struct",
    "textwrap", "time", "typing", "unicodedata", "uuid", "zlib",
};

// Dunders a cell may define in its own classes and use: the data model,
// operators, context managers, and harmless metadata (__name__, __doc__).
constexpr std::string_view kDefaultAllowedDunders[] = {
    "__abs__", "__add__", "__aenter__", "__aexit__", "__aiter__", "__all__", "__and__",
    "__anext__", "__await__", "__bool__", "__bytes__", "__call__", "__ceil__",
    "__complex__", "__contains__", "__copy__", "__debug__", "__deepcopy__", "__delitem__",
    "__divmod__", "__doc__", "__enter__", "__eq__", "__exit__", "__float__", "__floor__",
    "__floordiv__", "__format__", "__future__", "__ge__", "__getitem__", "__gt__", "__hash__", "__iadd__",
    "__iand__", "__ifloordiv__", "__ilshift__", "__imatmul__", "__imod__", "__imul__",
    "__index__", "__init__", "__int__", "__invert__", "__ior__", "__ipow__", "__irshift__",
    "__isub__", "__iter__", "__itruediv__", "__ixor__", "__le__", "__len__",
    "__length_hint__", "__lshift__", "__lt__", "__matmul__", "__missing__",
    "__mod__", "__module__", "__mul__", "__name__", "__ne__", "__neg__",
    "__next__", "__or__", "__pos__", "__post_init__", "__pow__", "__qualname__", "__radd__",
    "__rand__", "__rdivmod__", "__repr__", "__reversed__", "__rfloordiv__", "__rlshift__",
    "__rmatmul__", "__rmod__", "__rmul__", "__ror__", "__round__", "__rpow__",
    "__rrshift__", "__rshift__", "__rsub__", "__rtruediv__", "__rxor__", "__setitem__",
    "__slots__", "__str__", "__sub__", "__truediv__", "__trunc__", "__version__", "__xor__",
};

// Allowed dunders that are data, not methods: readable as attributes of
// anything. Every other allowed dunder is a method Python calls itself on an
// instance; as an attribute it is read only through `super()` (CheckCell).
constexpr std::string_view kDataDunders[] = {
    "__all__", "__debug__", "__doc__", "__future__", "__module__", "__name__",
    "__qualname__", "__slots__", "__version__",
};

// Attributes through which an exception hands back objects of the code that
// raised it (KeyError's key in `args`, StopIteration's `value`, the data a
// UnicodeError failed on in `object`): refused on a caught exception.
constexpr std::string_view kExceptionCarriers[] = {"args", "object", "value"};

// namedtuple's public API, underscored so as not to clash with field names.
// Among the default modules' objects only namedtuples answer to them
// (decimal.DecimalTuple, difflib.Match, statistics.LinearRegression; and
// 3.13's dataclasses._replace, which is dataclasses.replace), checked on
// 3.10-3.13. `_make` and `_replace` build an instance with tuple.__new__,
// without the class's own __new__/__init__, like 3.13's copy.replace.
constexpr std::string_view kPublicUnderscoreAttributes[] = {
    "_asdict", "_field_defaults", "_fields", "_make", "_replace",
};

// What a cell reaches of io: in-memory files and constants. The rest opens
// files (open, open_code, FileIO) or wraps an object and calls its close()
// when collected (TextIOWrapper, Buffered*: deferred code of the cell's own
// raw class); the base classes would be subclassed to the same end.
constexpr std::string_view kAllowedIoAttributes[] = {
    "BlockingIOError", "BytesIO", "DEFAULT_BUFFER_SIZE", "SEEK_CUR", "SEEK_END", "SEEK_SET",
    "StringIO", "UnsupportedOperation", "text_encoding",
};
constexpr std::string_view kIoClassNames[] = {"BytesIO", "StringIO"};

static_assert(std::ranges::is_sorted(kAlwaysDenied));
static_assert(std::ranges::is_sorted(kDataDunders));
static_assert(std::ranges::is_sorted(kExceptionCarriers));
static_assert(std::ranges::is_sorted(kPublicUnderscoreAttributes));
static_assert(std::ranges::is_sorted(kAllowedIoAttributes));
static_assert(std::ranges::is_sorted(kIoClassNames));
static_assert(std::ranges::is_sorted(kInternalAttributes));
static_assert(std::ranges::is_sorted(kDeniedOnlyAsNames));
static_assert(std::ranges::is_sorted(kDeniedModulePaths));
static_assert(std::ranges::is_sorted(kDeniedModuleLeaves));
static_assert(std::ranges::is_sorted(kMutatingMethods));
static_assert(std::ranges::is_sorted(kDeniedAttributes));
static_assert(std::ranges::is_sorted(kDefaultAllowedModules));
static_assert(std::ranges::is_sorted(kDefaultAllowedDunders));

template <std::size_t N>
bool Contains(const std::string_view (&table)[N], std::string_view name) {
  return std::binary_search(std::begin(table), std::end(table), name);
}

}  // namespace

std::span<const RuleInfo> AllRules() { return kRules; }

std::string_view RuleId(Rule rule) {
  for (const RuleInfo& info : kRules) {
    if (info.rule == rule) return info.id;
  }
  return "unknown-rule";
}

bool IsAlwaysDeniedName(std::string_view name) { return Contains(kAlwaysDenied, name); }
bool IsBuiltinName(std::string_view name) { return IsPythonBuiltinName(name); }
bool IsDeniedOnlyAsName(std::string_view name) { return Contains(kDeniedOnlyAsNames, name); }
bool IsDeniedModulePath(std::string_view dotted) { return Contains(kDeniedModulePaths, dotted); }
bool IsDeniedModuleLeaf(std::string_view name) { return Contains(kDeniedModuleLeaves, name); }
bool IsMutatingMethod(std::string_view name) { return Contains(kMutatingMethods, name); }
bool IsInternalAttribute(std::string_view name) { return Contains(kInternalAttributes, name); }
bool IsDeniedAttribute(std::string_view name) { return Contains(kDeniedAttributes, name); }

bool IsDataDunder(std::string_view name) { return Contains(kDataDunders, name); }
bool IsExceptionCarrier(std::string_view name) { return Contains(kExceptionCarriers, name); }
bool IsPublicUnderscoreAttribute(std::string_view name) {
  return Contains(kPublicUnderscoreAttributes, name);
}
bool IsAllowedIoAttribute(std::string_view name) { return Contains(kAllowedIoAttributes, name); }
bool IsIoClassName(std::string_view name) { return Contains(kIoClassNames, name); }

bool IsDunder(std::string_view name) {
  return name.size() > 4 && name.starts_with("__") && name.ends_with("__");
}

std::span<const std::string_view> DefaultAllowedModules() { return kDefaultAllowedModules; }
std::span<const std::string_view> DefaultAllowedDunders() { return kDefaultAllowedDunders; }

}  // namespace dolsot::sandbox
