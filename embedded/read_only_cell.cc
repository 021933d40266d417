// ReadOnlyCell (see read_only_cell.h): the shape of a cell from Python's own
// parser, the values it reads from the session's namespace, checked here.
#include "embedded/read_only_cell.h"

#include <sys/time.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <marshal.h>

#include "core/python_chars.h"
#include "embedded/interned_name.h"
#include "embedded/plain_expressions.h"
#include "embedded/py_ref.h"

namespace dolsot {
namespace {

// Runs once, in a private scope, on the C module `_ast` (importing `ast`
// costs ~10 ms here). `shape` returns (names read, comprehension variables)
// for a cell made only of the nodes below, else None. The walk lists a
// comprehension before its target, so a target's names are known when they
// are met.
constexpr char kGlueSource[] = R"PY(
import _ast
import sys as _sys
_compile = compile
_getattr = getattr
_isinstance = isinstance
_id = id
_set = set
_tuple = tuple
_range = range
_list = list
_AST = _ast.AST
_ONLY_AST = _ast.PyCF_ONLY_AST
_NODES = (_ast.Module, _ast.Expr, _ast.Pass, _ast.Constant, _ast.Name, _ast.Load, _ast.Store,
          _ast.BinOp, _ast.UnaryOp, _ast.BoolOp, _ast.Compare, _ast.IfExp, _ast.Call,
          _ast.keyword, _ast.Tuple, _ast.List, _ast.Set, _ast.Dict, _ast.Subscript, _ast.Slice,
          _ast.JoinedStr, _ast.FormattedValue, _ast.ListComp, _ast.SetComp, _ast.GeneratorExp,
          _ast.DictComp, _ast.comprehension, _ast.Starred, _ast.operator, _ast.unaryop,
          _ast.boolop, _ast.cmpop)
_STATEMENTS = (_ast.Assign, _ast.AugAssign, _ast.Attribute)
_ATTRIBUTE = _ast.Attribute
_SUBSCRIPT = _ast.Subscript
_CALL = _ast.Call
# Methods of list, dict and set that change the container in place, run no
# code but the builtins' own on plain values, and may be called on a name.
_MUTATORS = frozenset(('append', 'extend', 'insert', 'pop', 'remove', 'clear', 'sort',
                       'reverse', 'add', 'discard', 'update', 'setdefault'))
_NAME = _ast.Name
_LOAD = _ast.Load
_COMPREHENSION = _ast.comprehension
_ASSIGN = _ast.Assign
_AUG_ASSIGN = _ast.AugAssign
_monitoring = _getattr(_sys, 'monitoring', None)
get_tool = _monitoring.get_tool if _monitoring is not None else None

def _walk(node, allowed):
    # Breadth first, like ast.walk: a node before its children. None at the
    # first node of a kind a read-only cell never has.
    queue = [node]
    for node in queue:
        if not _isinstance(node, allowed):
            return None
        for field in node._fields:
            value = _getattr(node, field, None)
            if _isinstance(value, _list):
                queue.extend(item for item in value if _isinstance(item, _AST))
            elif _isinstance(value, _AST):
                queue.append(value)
    return queue

def _store(target, targets, names, mutated):
    # A statement's target: a name (into `names`), or a subscript of a name,
    # which changes the value that name holds (into `mutated`).
    if _isinstance(target, _NAME):
        targets.add(_id(target))
        names.add(target.id)
        return True
    if _isinstance(target, _SUBSCRIPT) and _isinstance(target.value, _NAME):
        targets.add(_id(target))
        mutated.add(target.value.id)
        return True
    return False

def shape(source, binding):
    # (names read, comprehension variables, names assigned, names augmented,
    # names whose values the cell changes in place); with `binding`,
    # top-level `name = ...`, `name op= ...`, `name[key] = ...`,
    # `name[key] op= ...` statements and calls `name.method(...)` of the
    # methods above are allowed too.
    try:
        tree = _compile(source, '<read-only check>', 'exec', _ONLY_AST, dont_inherit=True)
    except BaseException:
        return None
    targets = _set()  # the Name and Subscript nodes that may store (by identity)
    methods = _set()  # the Attribute nodes that may be called (by identity)
    assigned = _set()
    augmented = _set()
    mutated = _set()
    if binding:
        for statement in tree.body:
            if _isinstance(statement, _ASSIGN):
                for target in statement.targets:
                    if not _store(target, targets, assigned, mutated):
                        return None
            elif _isinstance(statement, _AUG_ASSIGN):
                if not _store(statement.target, targets, augmented, mutated):
                    return None
        for node in _walk(tree, _NODES + _STATEMENTS) or ():
            if (_isinstance(node, _CALL) and _isinstance(node.func, _ATTRIBUTE) and
                    _isinstance(node.func.value, _NAME) and node.func.attr in _MUTATORS):
                methods.add(_id(node.func))
                mutated.add(node.func.value.id)
    loaded = _set()
    local = _set()
    nodes = _walk(tree, _NODES + _STATEMENTS if binding else _NODES)
    if nodes is None:
        return None
    for node in nodes:
        if _isinstance(node, _COMPREHENSION):
            if node.is_async:
                return None
            for target in _walk(node.target, _NODES) or ():
                if _isinstance(target, _NAME):
                    targets.add(_id(target))
                    local.add(target.id)
        elif _isinstance(node, _NAME):
            if _isinstance(node.ctx, _LOAD):
                loaded.add(node.id)
            elif _id(node) not in targets:
                return None
        elif _isinstance(node, _SUBSCRIPT):
            if not _isinstance(node.ctx, _LOAD) and _id(node) not in targets:
                return None
        elif _isinstance(node, _ATTRIBUTE):
            if _id(node) not in methods:
                return None
    return (_tuple(loaded), _tuple(local), _tuple(assigned), _tuple(augmented),
            _tuple(mutated))
)PY";

constexpr std::size_t kMaxSource = 1024;
constexpr int kMaxAtomItems = 256;
// What one binding cell's values may take, marshalled.
constexpr std::size_t kMaxBindingBytes = 64 * 1024;

// Builtins that are pure on immutable values, builtins like these and what
// they make: no side effect but output (print writes to the cell's capture).
// Left out on purpose: anything reaching attributes or frames (getattr,
// vars, dir, globals, locals), running code (eval, exec, compile,
// __import__, breakpoint, help), touching files or stdin (open, input), and
// type (three arguments make a class whose methods the cell chooses).
constexpr const char* kPureFunctions[] = {
    "abs",  "all",   "any", "ascii", "bin", "callable", "chr",    "divmod", "format",
    "hash", "hex",   "id",  "isinstance", "issubclass", "iter", "len", "max", "min",
    "next", "oct",   "ord", "pow",   "print", "repr", "round", "sorted", "sum"};

struct PureType {
  const char* name;
  PyTypeObject* type;
};
const PureType kPureTypes[] = {
    {"bool", &PyBool_Type},           {"bytes", &PyBytes_Type},
    {"bytearray", &PyByteArray_Type}, {"complex", &PyComplex_Type},
    {"dict", &PyDict_Type},           {"enumerate", &PyEnum_Type},
    {"filter", &PyFilter_Type},       {"float", &PyFloat_Type},
    {"frozenset", &PyFrozenSet_Type}, {"int", &PyLong_Type},
    {"list", &PyList_Type},           {"map", &PyMap_Type},
    {"range", &PyRange_Type},         {"reversed", &PyReversed_Type},
    {"set", &PySet_Type},             {"slice", &PySlice_Type},
    {"str", &PyUnicode_Type},         {"tuple", &PyTuple_Type},
    {"zip", &PyZip_Type}};

struct Prepared {
  PyObject* shape = nullptr;   // the glue's shape()
  // sys.monitoring.get_tool (Python 3.12 and later), else nullptr.
  PyObject* get_tool = nullptr;
  PyObject* tool_ids[6] = {};  // the ints 0-5 (sys.monitoring's tool ids for users)
  std::map<std::string, PyObject*, std::less<>> trusted;  // name -> the builtin (strong)
  // DOLSOT_PLAIN_EXPRESSIONS=0 sends every cell to the parsed proof (for
  // benchmarks: the same build with and without the scan).
  bool scan_plain = true;
};
Prepared* g_prepared = nullptr;  // per process: a worker prepares once, its forks inherit

// Whether `check(member, budget)` holds for every member of a set or
// frozenset (of atoms: iterating it runs no code of the session's).
template <typename Check>
bool EveryMember(PyObject* set, int* budget, Check check) {
  if (PySet_GET_SIZE(set) > *budget) return false;
  Ref items(PySequence_Tuple(set));
  if (!items) {
    PyErr_Clear();
    return false;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items.get()); ++i) {
    if (!check(PyTuple_GET_ITEM(items.get(), i), budget)) return false;
  }
  return true;
}

// An exact builtin value whose reading runs no Python code, all the way
// down (within `budget` items): immutable atoms, and tuples, frozensets,
// lists, dicts, sets and bytearrays of them.
bool IsAtom(PyObject* value, int* budget) {
  if (--*budget < 0) return false;
  if (value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) ||
      PyFloat_CheckExact(value) || PyComplex_CheckExact(value) || PyUnicode_CheckExact(value) ||
      PyBytes_CheckExact(value) || Py_IS_TYPE(value, &PyRange_Type)) {
    return true;
  }
  if (PyTuple_CheckExact(value)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); ++i) {
      if (!IsAtom(PyTuple_GET_ITEM(value, i), budget)) return false;
    }
    return true;
  }
  if (PyList_CheckExact(value)) {
    // Mutable, but only through attributes, stores and `+=`, none of which
    // a read-only cell has: reading it runs no code of the session's.
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); ++i) {
      if (!IsAtom(PyList_GET_ITEM(value, i), budget)) return false;
    }
    return true;
  }
  if (PyDict_CheckExact(value)) {
    if (PyDict_GET_SIZE(value) > *budget) return false;
    Py_ssize_t position = 0;
    PyObject *key, *item;  // borrowed
    while (PyDict_Next(value, &position, &key, &item)) {
      if (!IsAtom(key, budget) || !IsAtom(item, budget)) return false;
    }
    return true;
  }
  if (PyByteArray_CheckExact(value)) return true;
  if (PyFrozenSet_CheckExact(value) || PyAnySet_CheckExact(value)) {
    return EveryMember(value, budget, IsAtom);
  }
  return false;
}

// The dict the cell's name lookups fall back to (globals' __builtins__).
PyObject* BuiltinsOf(PyObject* globals) {
  static constinit const InternedName kBuiltinsKey("__builtins__");  // once per cell
  PyObject* key = kBuiltinsKey.get();
  PyObject* builtins = key != nullptr ? PyDict_GetItemWithError(globals, key) : nullptr;  // borrowed
  if (builtins == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  if (PyModule_Check(builtins)) return PyModule_GetDict(builtins);
  return PyDict_Check(builtins) ? builtins : nullptr;
}

bool IntervalTimerSet() {
  for (int which : {ITIMER_REAL, ITIMER_VIRTUAL, ITIMER_PROF}) {
    itimerval timer{};
    if (::getitimer(which, &timer) != 0) return true;  // cannot tell: assume one
    if (timer.it_value.tv_sec != 0 || timer.it_value.tv_usec != 0) return true;
  }
  return false;
}

// Whether a trace or profile function (sys.settrace, sys.setprofile, or one
// set from C) or a sys.monitoring tool is installed: code of the session's
// that would run inside the cell. Read from the thread state, without a
// Python call, but for sys.monitoring's tools.
bool Hooked() {
  PyThreadState* state = PyThreadState_Get();
  if (state->c_tracefunc != nullptr || state->c_profilefunc != nullptr) return true;
  if (g_prepared->get_tool == nullptr) return false;
  for (PyObject* id : g_prepared->tool_ids) {
    Ref tool(PyObject_CallOneArg(g_prepared->get_tool, id));
    if (!tool || tool.get() != Py_None) return true;
  }
  return false;
}

// Words that make a cell not read-only wherever they stand (a statement, a
// lambda, an import): a word in a string or a comment only costs the fast
// path.
bool RefusedWord(std::string_view word) {
  static constexpr std::string_view kWords[] = {
      "import", "def",    "class",  "lambda", "del",   "global", "nonlocal", "while",
      "with",   "try",    "except", "finally", "yield", "await",  "async",    "return",
      "raise",  "assert", "break",  "continue", "from"};
  for (std::string_view refused : kWords) {
    if (word == refused) return true;
  }
  return false;
}

// The glue's _MUTATORS: in a binding cell, `name.method(...)` may call them.
bool IsMutator(std::string_view word) {
  static constexpr std::string_view kMutators[] = {"append", "extend", "insert", "pop",
                                                   "remove", "clear",  "sort",   "reverse",
                                                   "add",    "discard", "update", "setdefault"};
  for (std::string_view mutator : kMutators) {
    if (word == mutator) return true;
  }
  return false;
}

// A linear scan that turns away, in about a microsecond, most cells that
// are not read-only (an assignment, an attribute, a statement, a block),
// before Python's parser (30-150 us) is asked: a cell that could change
// state pays only this. It never says no to a cell the full check would
// pass, except where its crude view of strings sees code in one (a false
// "no" only costs the fast path); what it lets through, the full check
// decides. With `binding` it lets assignments and calls of the in-place
// methods (IsMutator) through too, for the binding-cell proof.
bool MayBeReadOnly(std::string_view code, bool binding) {
  int depth = 0;            // brackets open (strings not told apart)
  bool line_start = true;   // nothing but blanks on this line yet
  for (std::size_t i = 0; i < code.size();) {
    const char c = code[i];
    if (c == '\n') {
      line_start = true;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\\') {
      ++i;
      continue;
    }
    if (c == '#') {
      while (i < code.size() && code[i] != '\n') ++i;
      continue;
    }
    const bool at_line_start = line_start && depth == 0;
    line_start = false;
    if (IsNameStartByte(c)) {
      std::size_t end = i;
      while (end < code.size() && IsNameByte(code[end])) ++end;
      std::string_view word = code.substr(i, end - i);
      if (RefusedWord(word)) return false;
      if (depth == 0 && word == "for") return false;  // a loop (a comprehension has brackets)
      if (at_line_start && (word == "if" || word == "elif" || word == "else")) return false;
      i = end;
      continue;
    }
    if (IsAsciiDigit(c)) {  // 1.5, 1e-3, 0x1F: no attribute
      while (i < code.size() && (IsNameByte(code[i]) || code[i] == '.')) ++i;
      continue;
    }
    switch (c) {
      case '.':
        if (i + 1 < code.size() && IsNameStartByte(code[i + 1])) {  // an attribute
          std::size_t end = i + 1;
          while (end < code.size() && IsNameByte(code[end])) ++end;
          if (!binding || !IsMutator(code.substr(i + 1, end - i - 1))) return false;
          i = end;
          continue;
        }
        break;
      case '(': case '[': case '{':
        ++depth;
        break;
      case ')': case ']': case '}':
        if (depth > 0) --depth;
        break;
      case ':':
        if (depth == 0) return false;  // a block, an annotation
        if (i + 1 < code.size() && code[i + 1] == '=') return false;  // :=
        break;
      case '=': {
        const bool comparison = (i + 1 < code.size() && code[i + 1] == '=') ||
                                (i > 0 && (code[i - 1] == '=' || code[i - 1] == '!' ||
                                           code[i - 1] == '<' || code[i - 1] == '>'));
        if (comparison) {
          i += (i + 1 < code.size() && code[i + 1] == '=') ? 2 : 1;
          continue;
        }
        if (depth == 0 && !binding) return false;  // an assignment, += and the like
        break;  // a keyword argument (or, binding, an assignment the parse checks)
      }
      default:
        break;
    }
    ++i;
  }
  return true;
}

// An exact builtin value no operation can change in place, all the way down
// (within `budget` items): what `name op= ...` may start from without
// touching anything but the name.
bool IsImmutable(PyObject* value, int* budget) {
  if (--*budget < 0) return false;
  if (value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) ||
      PyFloat_CheckExact(value) || PyComplex_CheckExact(value) || PyUnicode_CheckExact(value) ||
      PyBytes_CheckExact(value)) {
    return true;
  }
  if (PyTuple_CheckExact(value)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); ++i) {
      if (!IsImmutable(PyTuple_GET_ITEM(value, i), budget)) return false;
    }
    return true;
  }
  return false;
}

// A name a binding cell may bind: no dunder (`__builtins__` changes what
// every name means).
bool BindableName(PyObject* name) {
  const char* text = PyUnicode_AsUTF8(name);
  return text != nullptr && !(text[0] == '_' && text[1] == '_');
}

bool Contains(PyObject* tuple, PyObject* name) {
  int found = PySequence_Contains(tuple, name);
  if (found < 0) PyErr_Clear();
  return found == 1;
}

// What a name the cell reads holds in the session's namespace.
enum class Read { kPlain, kAbsent, kRefused };
Read ReadOf(PyObject* globals, PyObject* name, int* budget) {
  PyObject* value = PyDict_GetItemWithError(globals, name);  // borrowed
  if (value != nullptr) return IsAtom(value, budget) ? Read::kPlain : Read::kRefused;
  return PyErr_Occurred() ? Read::kRefused : Read::kAbsent;
}

// Whether `name`, absent from the namespace, finds one of the trusted
// builtins, the interpreter's own object.
bool TrustedBuiltin(PyObject* builtins, PyObject* name) {
  const char* text = PyUnicode_AsUTF8(name);
  if (text == nullptr || builtins == nullptr) return false;
  auto trusted = g_prepared->trusted.find(std::string_view(text));
  if (trusted == g_prepared->trusted.end()) return false;
  return PyDict_GetItemWithError(builtins, name) == trusted->second;  // borrowed
}

// The proof for a cell of plain expressions (plain_expressions.h), without
// Python's parser: every name it reads holds a plain value or is a trusted
// builtin. nullopt when the scan refuses the cell (the parsed proof decides).
std::optional<bool> PlainExpressionsReadOnly(std::string_view code, PyObject* globals) {
  std::vector<std::string_view> names;
  if (!ScanPlainExpressions(code, &names)) return std::nullopt;
  PyObject* builtins = BuiltinsOf(globals);
  int budget = kMaxAtomItems;
  for (std::string_view text : names) {
    Ref name(PyUnicode_FromStringAndSize(text.data(), static_cast<Py_ssize_t>(text.size())));
    if (!name) return false;
    Read read = ReadOf(globals, name.get(), &budget);
    if (read == Read::kRefused || (read == Read::kAbsent && !TrustedBuiltin(builtins, name.get()))) {
      return false;
    }
  }
  return true;
}

ReadOnlyCell::Effect ClassifyLocked(std::string_view code, PyObject* globals, bool binding,
                                    std::vector<std::string>* names) {
  using Effect = ReadOnlyCell::Effect;
  if (g_prepared == nullptr || code.size() > kMaxSource || !PyDict_Check(globals)) return Effect::kAny;
  if (!MayBeReadOnly(code, binding)) return Effect::kAny;
  if (IntervalTimerSet()) return Effect::kAny;
  if (Hooked()) return Effect::kAny;
  if (g_prepared->scan_plain) {
    if (std::optional<bool> plain = PlainExpressionsReadOnly(code, globals)) {
      return *plain ? Effect::kNothing : Effect::kAny;
    }
  }
  Ref source(PyUnicode_DecodeUTF8(code.data(), static_cast<Py_ssize_t>(code.size()), "strict"));
  if (!source) return Effect::kAny;
  Ref shape(PyObject_CallFunctionObjArgs(g_prepared->shape, source.get(),
                                         binding ? Py_True : Py_False, nullptr));
  if (!shape || !PyTuple_Check(shape.get()) || PyTuple_GET_SIZE(shape.get()) != 5) return Effect::kAny;
  PyObject* loaded = PyTuple_GET_ITEM(shape.get(), 0);
  PyObject* local = PyTuple_GET_ITEM(shape.get(), 1);
  PyObject* assigned = PyTuple_GET_ITEM(shape.get(), 2);
  PyObject* augmented = PyTuple_GET_ITEM(shape.get(), 3);
  PyObject* mutated = PyTuple_GET_ITEM(shape.get(), 4);
  PyObject* builtins = BuiltinsOf(globals);
  int budget = kMaxAtomItems;
  // A name the cell assigns: what it held is let go (an atom: no finalizer
  // runs). A name it augments: it starts from what the namespace holds, an
  // immutable value (a list's `+=` would change the list in place, which
  // another name may hold), and is assigned nowhere else in the cell (so
  // that holds when the statement runs).
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(assigned); ++i) {
    PyObject* name = PyTuple_GET_ITEM(assigned, i);
    if (!BindableName(name) || Contains(augmented, name)) return Effect::kAny;
    PyObject* value = PyDict_GetItemWithError(globals, name);  // borrowed
    if (value == nullptr && PyErr_Occurred()) return Effect::kAny;
    if (value != nullptr && !IsAtom(value, &budget)) return Effect::kAny;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(augmented); ++i) {
    PyObject* name = PyTuple_GET_ITEM(augmented, i);
    if (!BindableName(name)) return Effect::kAny;
    PyObject* value = PyDict_GetItemWithError(globals, name);  // borrowed
    if (value == nullptr || !IsImmutable(value, &budget)) return Effect::kAny;
  }
  // A name whose value the cell changes in place (a store into it, one of
  // the methods): an exact list, dict or set of atoms the namespace holds
  // now, not rebound in the cell (the change must reach the value checked
  // here). Whether another object holds it too shows after the cell
  // (MarshalBindings: then it is not a binding cell, and its snapshot and
  // checkpoint are made as for any cell).
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mutated); ++i) {
    PyObject* name = PyTuple_GET_ITEM(mutated, i);
    if (!BindableName(name) || Contains(assigned, name) || Contains(augmented, name)) {
      return Effect::kAny;
    }
    PyObject* value = PyDict_GetItemWithError(globals, name);  // borrowed
    if (value == nullptr ||
        !(PyList_CheckExact(value) || PyDict_CheckExact(value) ||
          (PyAnySet_CheckExact(value) && !PyFrozenSet_CheckExact(value))) ||
        !IsAtom(value, &budget)) {
      return Effect::kAny;
    }
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(loaded); ++i) {
    PyObject* name = PyTuple_GET_ITEM(loaded, i);
    Read read = ReadOf(globals, name, &budget);
    if (read == Read::kRefused) return Effect::kAny;
    // Absent: a comprehension's variable, or a name the cell binds (read
    // before that, it raises NameError), or one of the trusted builtins.
    if (read == Read::kAbsent && !Contains(local, name) && !Contains(assigned, name) &&
        !TrustedBuiltin(builtins, name)) {
      return Effect::kAny;
    }
  }
  const Py_ssize_t bound =
      PyTuple_GET_SIZE(assigned) + PyTuple_GET_SIZE(augmented) + PyTuple_GET_SIZE(mutated);
  if (bound == 0) return Effect::kNothing;
  if (names != nullptr) {
    names->clear();
    for (PyObject* group : {assigned, augmented, mutated}) {
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(group); ++i) {
        const char* text = PyUnicode_AsUTF8(PyTuple_GET_ITEM(group, i));
        if (text == nullptr) return Effect::kAny;
        names->emplace_back(text);
      }
    }
  }
  return Effect::kItsBindings;
}

// What a binding cell bound, for the host to hand a promoted snapshot: an
// exact builtin value marshal writes exactly, whose mutable parts (lists,
// dicts, sets, and the tuples holding them) no other object holds (their
// reference count is their one owner's), so a copy of it is as good as
// it; within `budget` items.
enum class Owned { kNo, kImmutable, kMutable };
Owned OwnedPlain(PyObject* value, int* budget) {
  if (--*budget < 0) return Owned::kNo;
  if (value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) ||
      PyFloat_CheckExact(value) || PyComplex_CheckExact(value) || PyUnicode_CheckExact(value) ||
      PyBytes_CheckExact(value)) {
    return Owned::kImmutable;
  }
  if (PyFrozenSet_CheckExact(value)) {
    return EveryMember(value, budget, IsImmutable) ? Owned::kImmutable : Owned::kNo;
  }
  const bool single_owner = Py_REFCNT(value) == 1;
  if (PyTuple_CheckExact(value)) {
    Owned owned = Owned::kImmutable;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); ++i) {
      Owned item = OwnedPlain(PyTuple_GET_ITEM(value, i), budget);
      if (item == Owned::kNo) return Owned::kNo;
      if (item == Owned::kMutable) owned = Owned::kMutable;
    }
    return owned == Owned::kMutable && !single_owner ? Owned::kNo : owned;
  }
  if (!single_owner) return Owned::kNo;
  if (PyList_CheckExact(value)) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); ++i) {
      if (OwnedPlain(PyList_GET_ITEM(value, i), budget) == Owned::kNo) return Owned::kNo;
    }
    return Owned::kMutable;
  }
  if (PyDict_CheckExact(value)) {
    if (PyDict_GET_SIZE(value) > *budget) return Owned::kNo;
    Py_ssize_t position = 0;
    PyObject *key, *item;  // borrowed
    while (PyDict_Next(value, &position, &key, &item)) {
      if (!IsImmutable(key, budget) || OwnedPlain(item, budget) == Owned::kNo) return Owned::kNo;
    }
    return Owned::kMutable;
  }
  if (PyAnySet_CheckExact(value)) {
    return EveryMember(value, budget, IsImmutable) ? Owned::kMutable : Owned::kNo;
  }
  return Owned::kNo;
}

}  // namespace

bool ReadOnlyCell::Prepare() {
  if (g_prepared != nullptr) return true;
  auto prepared = std::make_unique<Prepared>();
  Ref scope(PyDict_New());
  Ref builtins_module(PyImport_ImportModule("builtins"));
  if (!scope || !builtins_module ||
      PyDict_SetItemString(scope.get(), "__builtins__", builtins_module.get()) < 0 ||
      PyDict_SetItemString(scope.get(), "__name__", Ref(PyUnicode_FromString("dolsot_read_only")).get()) < 0) {
    PyErr_Clear();
    return false;
  }
  Ref done(PyRun_String(kGlueSource, Py_file_input, scope.get(), scope.get()));
  if (!done) {
    PyErr_Clear();
    return false;
  }
  prepared->shape = Py_XNewRef(PyDict_GetItemString(scope.get(), "shape"));
  PyObject* get_tool = PyDict_GetItemString(scope.get(), "get_tool");  // borrowed
  if (prepared->shape == nullptr || get_tool == nullptr) return false;
  if (get_tool != Py_None) {
    prepared->get_tool = Py_NewRef(get_tool);
    for (int id = 0; id < 6; ++id) {
      prepared->tool_ids[id] = PyLong_FromLong(id);
      if (prepared->tool_ids[id] == nullptr) {
        PyErr_Clear();
        return false;
      }
    }
  }
  PyObject* builtins = PyModule_GetDict(builtins_module.get());  // borrowed
  for (const char* name : kPureFunctions) {
    PyObject* function = PyDict_GetItemString(builtins, name);  // borrowed
    // The interpreter's own: a C function of the builtins module, by that name.
    if (function == nullptr || !PyCFunction_Check(function) ||
        PyCFunction_GET_SELF(function) != builtins_module.get() ||
        std::strcmp(reinterpret_cast<PyCFunctionObject*>(function)->m_ml->ml_name, name) != 0) {
      continue;
    }
    prepared->trusted.emplace(name, Py_NewRef(function));
  }
  for (const PureType& pure : kPureTypes) {
    PyObject* type = PyDict_GetItemString(builtins, pure.name);  // borrowed
    if (type == reinterpret_cast<PyObject*>(pure.type)) prepared->trusted.emplace(pure.name, Py_NewRef(type));
  }
  const char* scan = std::getenv("DOLSOT_PLAIN_EXPRESSIONS");
  prepared->scan_plain = scan == nullptr || std::strcmp(scan, "0") != 0;
  g_prepared = prepared.release();  // kept for the process's life
  return true;
}

ReadOnlyCell::Effect ReadOnlyCell::Classify(std::string_view code, PyObject* globals, bool binding,
                                             std::vector<std::string>* names) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  Effect effect = ClassifyLocked(code, globals, binding, names);
  PyErr_Clear();
  PyErr_Restore(type, value, traceback);
  return effect;
}

bool ReadOnlyCell::Check(std::string_view code, PyObject* globals) {
  return Classify(code, globals, false, nullptr) == Effect::kNothing;
}

bool ReadOnlyCell::MarshalBindings(PyObject* globals, const std::vector<std::string>& names,
                                   std::vector<std::string>* values) {
  PyObject *type, *error, *traceback;
  PyErr_Fetch(&type, &error, &traceback);
  values->clear();
  int budget = kMaxAtomItems;
  std::size_t total = 0;
  bool ok = PyDict_Check(globals);
  for (std::size_t i = 0; ok && i < names.size(); ++i) {
    PyObject* value = PyDict_GetItemString(globals, names[i].c_str());  // borrowed
    ok = value != nullptr && OwnedPlain(value, &budget) != Owned::kNo;
    if (!ok) break;
    Ref written(PyMarshal_WriteObjectToString(value, Py_MARSHAL_VERSION));
    ok = written && PyBytes_Check(written.get());
    if (!ok) break;
    total += static_cast<std::size_t>(PyBytes_GET_SIZE(written.get()));
    ok = total <= kMaxBindingBytes;
    if (ok) values->emplace_back(PyBytes_AS_STRING(written.get()), PyBytes_GET_SIZE(written.get()));
  }
  PyErr_Clear();
  PyErr_Restore(type, error, traceback);
  if (!ok) values->clear();
  return ok;
}

bool ReadOnlyCell::ApplyBindings(PyObject* globals, const std::vector<std::string>& names,
                                 const std::vector<std::string>& values) {
  if (names.size() != values.size() || !PyDict_Check(globals)) return false;
  for (std::size_t i = 0; i < names.size(); ++i) {
    Ref value(PyMarshal_ReadObjectFromString(values[i].data(), static_cast<Py_ssize_t>(values[i].size())));
    if (!value || PyDict_SetItemString(globals, names[i].c_str(), value.get()) < 0) {
      PyErr_Clear();
      return false;
    }
  }
  return true;
}

ReadOnlyCell::Scope::Scope(bool active) {
  if (active) resume_ = PyGC_Disable() != 0;
}

ReadOnlyCell::Scope::~Scope() {
  if (resume_) PyGC_Enable();
}

}  // namespace dolsot
