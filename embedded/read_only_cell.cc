// ReadOnlyCell (see read_only_cell.h): the shape of a cell from Python's own
// parser, the values it reads from the session's namespace, checked here.
#include "embedded/read_only_cell.h"

#include <sys/time.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>

#include <marshal.h>

#include "core/python_chars.h"
#include "embedded/cell_prescan.h"
#include "embedded/cell_sources.h"
#include "embedded/cell_tools.h"
#include "embedded/function_recipe.h"
#include "embedded/interned_name.h"
#include "embedded/plain_expressions.h"
#include "embedded/plain_values.h"
#include "embedded/pure_functions.h"
#include "embedded/python_text.h"

namespace dolsot {
namespace {

// Runs once, in a private scope, on the C module `_ast` (importing `ast`
// costs ~10 ms here); `_METHODS` (cell_prescan.h's BindingMethods) is put in the scope first.
// `shape` returns (names read, comprehension variables) for a read-only
// cell made only of the nodes below, else None. `effects` returns (names
// read, names bound, definitions) for a binding cell (read_only_cell.h),
// else None; `matching` the proven functions a namespace holds as a cell's
// source defines them. Walks
// are breadth first, so a node is met before its children: a call before
// the attribute it calls, a comprehension before its target.
constexpr char kGlueSource[] = R"PY(
import _ast
import sys as _sys
_compile = compile
_type = type
_getattr = getattr
_isinstance = isinstance
_id = id
_len = len
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
# A binding cell's statements; a proven function body's add return and
# assert. Expressions may also call a method of _METHODS on any value.
_STATEMENTS = (_ast.Assign, _ast.AugAssign, _ast.For, _ast.While, _ast.If, _ast.Break,
               _ast.Continue)
# A lambda is an expression whose body runs where it is called: under the
# same rules; its parameters' names are read as the cell's own (absent, or
# plain), which is only stricter.
_TOP = _NODES + _STATEMENTS + (_ast.Attribute, _ast.Lambda, _ast.arguments, _ast.arg)
_BODY = _TOP + (_ast.Return, _ast.Assert)
_COMPOUND = (_ast.For, _ast.While, _ast.If)
_DEF = _ast.FunctionDef
_ATTRIBUTE = _ast.Attribute
_SUBSCRIPT = _ast.Subscript
_CALL = _ast.Call
_NAME = _ast.Name
_LOAD = _ast.Load
_COMPREHENSION = _ast.comprehension
# Called with more than one argument these look up a codec, which may import.
_CONVERTERS = frozenset(('str', 'bytes', 'bytearray'))
_monitoring = _getattr(_sys, 'monitoring', None)
get_tool = _monitoring.get_tool if _monitoring is not None else None

def _children(node, queue):
    # Appends what `node` holds to `queue`, in field order.
    for field in node._fields:
        value = _getattr(node, field, None)
        if _isinstance(value, _list):
            queue.extend(item for item in value if _isinstance(item, _AST))
        elif _isinstance(value, _AST):
            queue.append(value)

def _walk(node, allowed):
    # Breadth first, like ast.walk: a node before its children. None at the
    # first node of a kind a read-only cell never has.
    queue = [node]
    for node in queue:
        if not _isinstance(node, allowed):
            return None
        _children(node, queue)
    return queue

def shape(source):
    # (names read, comprehension variables) of a read-only cell.
    try:
        tree = _compile(source, '<read-only check>', 'exec', _ONLY_AST, dont_inherit=True)
    except BaseException:
        return None
    loaded = _set()
    local = _set()
    targets = _set()
    nodes = _walk(tree, _NODES)
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
            if not _isinstance(node.ctx, _LOAD):
                return None
        elif (_isinstance(node, _CALL) and _isinstance(node.func, _NAME) and
              node.func.id in _CONVERTERS and (_len(node.args) > 1 or node.keywords)):
            return None
    return (_tuple(loaded), _tuple(local))

def _parameters(node):
    args = node.args
    return [arg for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]
            if arg is not None]

def _body(node):
    # The globals a def's body reads when the body is proven: made of the
    # nodes of _BODY only (no global, nonlocal, del, import, def, class,
    # lambda, with, try, raise, yield, await), attributes only to call a
    # method of _METHODS. None otherwise. A comprehension's variable counts
    # as read too (the proof then finds it absent, or checks what it is).
    if node.decorator_list:
        return None
    loads = _set()
    stores = _set()
    if not _scope(node.body, _BODY, loads, stores, None):
        return None
    for arg in _parameters(node):
        stores.add(arg.arg)
    return _tuple(loads - stores)

def _scope(roots, allowed, loads, stores, definitions):
    # Walks the nodes `roots` and what they hold; False at the first node
    # `allowed` lacks. With `definitions` (a list; None refuses them), a
    # def is allowed: what runs when it runs (its defaults, its
    # annotations) is walked as the cell's own, its name is bound, and
    # (name, line, what _body says) is added to `definitions`.
    called = _set()
    comprehended = _set()
    queue = _list(roots)
    for node in queue:
        if _isinstance(node, _DEF) and definitions is not None:
            if node.decorator_list or _getattr(node, 'type_params', None):
                return False
            args = node.args
            queue.extend(args.defaults)
            queue.extend(default for default in args.kw_defaults if default is not None)
            queue.extend(arg.annotation for arg in _parameters(node) if arg.annotation is not None)
            if node.returns is not None:
                queue.append(node.returns)
            stores.add(node.name)
            definitions.append((node.name, node.lineno, _body(node)))
            continue
        if not _isinstance(node, allowed):
            return False
        if _isinstance(node, _CALL):
            function = node.func
            if _isinstance(function, _ATTRIBUTE):
                if function.attr not in _METHODS:
                    return False
                called.add(_id(function))
            elif (_isinstance(function, _NAME) and function.id in _CONVERTERS and
                  (_len(node.args) > 1 or node.keywords)):
                return False
        elif _isinstance(node, _ATTRIBUTE):
            if _id(node) not in called:
                return False
        elif _isinstance(node, _COMPREHENSION):
            if node.is_async:
                return False
            for target in _walk(node.target, allowed) or ():
                if _isinstance(target, _NAME):
                    comprehended.add(_id(target))
        elif _isinstance(node, _NAME):
            if _isinstance(node.ctx, _LOAD):
                loads.add(node.id)
            elif _id(node) not in comprehended:
                stores.add(node.id)
        _children(node, queue)
    return True

def effects(source):
    # (names read, names bound, definitions) of a binding cell.
    try:
        tree = _compile(source, '<binding check>', 'exec', _ONLY_AST, dont_inherit=True)
    except BaseException:
        return None
    loads = _set()
    stores = _set()
    found = []
    if not _scope(tree.body, _TOP, loads, stores, found):
        return None
    return (_tuple(loads), _tuple(stores), _tuple(found))

_CodeType = _type(_walk.__code__)
_FunctionType = _type(_walk)

def matching(source, filename, namespace):
    # (code, reads) for each def of the cell `source` (named `filename`)
    # whose body was proven and whose function `namespace` holds with the
    # very code that def compiles to: a function made again elsewhere (a
    # checkpoint, a recipe) is proven again only when it is what its
    # source says.
    try:
        module = _compile(source, filename, 'exec', dont_inherit=True)
    except BaseException:
        return ()
    codes = {}
    for const in module.co_consts:
        if _type(const) is _CodeType:
            codes[(const.co_name, const.co_firstlineno)] = const
    found = []
    for name, line, reads in definitions(source):
        function = namespace.get(name) if reads is not None else None
        if _type(function) is not _FunctionType:
            continue
        code = function.__code__
        compiled = codes.get((name, line))
        if compiled is not None and code.co_filename == filename and code == compiled:
            found.append((code, reads))
    return _tuple(found)

def definitions(source):
    # (name, line, reads) of each def a cell's source runs at its top level
    # (in its loops and ifs too), reads None where the body is not proven.
    try:
        tree = _compile(source, '<definitions>', 'exec', _ONLY_AST, dont_inherit=True)
    except BaseException:
        return ()
    found = []
    queue = _list(tree.body)
    for node in queue:
        if _isinstance(node, _DEF):
            found.append((node.name, node.lineno, _body(node)))
        elif _isinstance(node, _COMPOUND):
            queue.extend(node.body)
            queue.extend(node.orelse)
    return _tuple(found)
)PY";

constexpr std::size_t kMaxSource = 1024;
// A binding cell may define functions, whose bodies the proof does not walk
// for the cell: it may be longer (its parse, ~30 us a KiB, is what a cell
// turned away pays).
constexpr std::size_t kMaxBindingSource = 16 * 1024;
constexpr int kMaxAtomItems = 256;
// What a binding cell's proof may walk (the values it reads and binds, each
// walk at most this many items) and its values may take, marshalled: ~50 us
// of walking at most, against a fork of ~2-3 ms (an agent's `words =
// context.split()` over a few KB of text, a dict counting them).
constexpr int kMaxBindingItems = 4096;
constexpr std::size_t kMaxBindingBytes = 256 * 1024;

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
  PyObject* shape = nullptr;        // the glue's shape()
  PyObject* effects = nullptr;      // effects()
  PyObject* matching = nullptr;     // matching()
  // sys.monitoring.get_tool (Python 3.12 and later), else nullptr.
  PyObject* get_tool = nullptr;
  PyObject* tool_ids[6] = {};  // the ints 0-5 (sys.monitoring's tool ids for users)
  std::map<std::string, PyObject*, std::less<>> trusted;  // name -> the builtin (strong)
  // DOLSOT_PLAIN_EXPRESSIONS=0 sends every cell to the parsed proof (for
  // benchmarks: the same build with and without the scan).
  bool scan_plain = true;
};
Prepared* g_prepared = nullptr;  // per process: a worker prepares once, its forks inherit

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

// What a name the cell reads holds in the session's namespace: a plain
// value, or a host tool's stub as made (IsHostToolStub: it runs only the
// C transport, which calls Unproven() on what is not plain data).
enum class Read { kPlain, kAbsent, kRefused };
Read ReadOf(PyObject* globals, PyObject* name, int* budget) {
  PyObject* value = PyDict_GetItemWithError(globals, name);  // borrowed
  if (value != nullptr) {
    return IsAtom(value, budget) || IsHostToolStub(value) ? Read::kPlain : Read::kRefused;
  }
  return PyErr_Occurred() ? Read::kRefused : Read::kAbsent;
}

// Whether `name`, absent from the namespace, finds one of the trusted
// builtins, the interpreter's own object, or a host tool's stub.
bool TrustedBuiltin(PyObject* builtins, PyObject* name) {
  const char* text = PyUnicode_AsUTF8(name);
  if (text == nullptr || builtins == nullptr) return false;
  PyObject* value = PyDict_GetItemWithError(builtins, name);  // borrowed
  if (value == nullptr) return false;
  auto trusted = g_prepared->trusted.find(std::string_view(text));
  if (trusted != g_prepared->trusted.end() && value == trusted->second) return true;
  return IsHostToolStub(value);
}

// Whether `name`, absent from the namespace, finds nothing in the builtins
// either: read before the cell binds it (a comprehension's variable, a
// name the cell assigns), it raises NameError, never finds a builtin the
// proof does not trust (`[exec(s) for exec in [exec]]`, `exec(s); exec = 0`
// read `exec` as the builtin first).
bool UnboundEverywhere(PyObject* builtins, PyObject* name) {
  if (builtins == nullptr) return false;
  if (PyDict_GetItemWithError(builtins, name) != nullptr) return false;  // borrowed
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
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

ReadOnlyCell::Effect ClassifyReadOnly(std::string_view code, PyObject* globals) {
  using Effect = ReadOnlyCell::Effect;
  if (code.size() > kMaxSource) return Effect::kAny;
  if (!MayBeReadOnly(code)) return Effect::kAny;
  if (IntervalTimerSet()) return Effect::kAny;
  if (Hooked()) return Effect::kAny;
  if (g_prepared->scan_plain) {
    if (std::optional<bool> plain = PlainExpressionsReadOnly(code, globals)) {
      return *plain ? Effect::kNothing : Effect::kAny;
    }
  }
  Ref source(PyUnicode_DecodeUTF8(code.data(), static_cast<Py_ssize_t>(code.size()), "strict"));
  if (!source) return Effect::kAny;
  Ref shape(PyObject_CallOneArg(g_prepared->shape, source.get()));
  if (!shape || !PyTuple_Check(shape.get()) || PyTuple_GET_SIZE(shape.get()) != 2) return Effect::kAny;
  PyObject* loaded = PyTuple_GET_ITEM(shape.get(), 0);
  PyObject* local = PyTuple_GET_ITEM(shape.get(), 1);
  PyObject* builtins = BuiltinsOf(globals);
  int budget = kMaxAtomItems;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(loaded); ++i) {
    PyObject* name = PyTuple_GET_ITEM(loaded, i);
    Read read = ReadOf(globals, name, &budget);
    if (read == Read::kRefused) return Effect::kAny;
    // Absent: one of the trusted builtins, or a comprehension's variable
    // that is no builtin at all.
    if (read == Read::kAbsent && !TrustedBuiltin(builtins, name) &&
        !(Contains(local, name) && UnboundEverywhere(builtins, name))) {
      return Effect::kAny;
    }
  }
  return Effect::kNothing;
}

// The binding proof (read_only_cell.h's kItsBindings): resolves every name
// the cell reads, and every name a proven function it reaches reads, to
// what it holds now, and gathers the names whose values the cell may
// change: those it binds, and those it reads that hold a mutable value.
class BindingProof {
 public:
  explicit BindingProof(PyObject* globals) : globals_(globals), builtins_(BuiltinsOf(globals)) {}

  // A name a def of the cell binds: a function whose body no proof has
  // walked yet (it is registered only after the cell), so the cell, and any
  // function it may call, must not read it.
  void Defines(PyObject* name) { defined_.push_back(name); }

  // A name the cell (or a function it may call) reads.
  bool Read(PyObject* name) {
    for (PyObject* defined : defined_) {
      if (PyUnicode_Compare(defined, name) == 0) return false;
    }
    PyObject* value = PyDict_GetItemWithError(globals_, name);  // borrowed
    if (value == nullptr) {
      if (PyErr_Occurred()) return false;
      // A trusted builtin, or nothing at all: NameError unless the cell
      // bound it first, to a value the proof accounts for.
      return TrustedBuiltin(builtins_, name) || UnboundEverywhere(builtins_, name);
    }
    if (IsHostToolStub(value)) return true;  // an alias of a tool (see ReadOf)
    if (PyFunction_Check(value)) return Function(value);
    if (!IsAtom(value, &atom_budget_)) return false;
    int immutable_budget = kMaxBindingItems;
    if (Py_IS_TYPE(value, &PyRange_Type) || IsImmutable(value, &immutable_budget)) return true;
    // Mutable: whatever the cell does to it shows in the name's value
    // afterwards only when the namespace alone holds it, all the way down
    // (no other name, no other object sees it change unrecorded).
    if (OwnedPlain(value, &owned_budget_) == Owned::kNo) return false;
    return Capture(name);
  }

  // A name the cell binds: what it held is let go, which must run no code
  // (an atom, or a function FunctionRecipe can let go).
  bool Bind(PyObject* name) {
    if (!BindableName(name)) return false;
    PyObject* value = PyDict_GetItemWithError(globals_, name);  // borrowed
    if (value == nullptr) {
      if (PyErr_Occurred()) return false;
    } else if (!IsAtom(value, &atom_budget_) && !FunctionRecipe::Disposable(value)) {
      return false;
    }
    return Capture(name);
  }

  bool Names(std::vector<std::string>* names) const {
    names->clear();
    for (PyObject* name : captured_) {
      const char* text = PyUnicode_AsUTF8(name);
      if (text == nullptr) return false;
      names->emplace_back(text);
    }
    return true;
  }
  bool empty() const { return captured_.empty(); }

 private:
  // A function the cell may call: one whose body was proven
  // (PureFunctions), as it was proven; every global it reads, read here.
  bool Function(PyObject* function) {
    if (!functions_.insert(function).second) return true;  // already read (recursion)
    PyObject* reads = PureFunctions::Reads(function, globals_, builtins_);  // borrowed
    if (reads == nullptr) return false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(reads); ++i) {
      if (!Read(PyTuple_GET_ITEM(reads, i))) return false;
    }
    return true;
  }

  bool Capture(PyObject* name) {
    for (PyObject* kept : captured_) {
      if (kept == name || PyUnicode_Compare(kept, name) == 0) return true;
    }
    captured_.push_back(name);
    return true;
  }

  PyObject* globals_;
  PyObject* builtins_;
  int atom_budget_ = kMaxBindingItems;
  int owned_budget_ = kMaxBindingItems;
  std::set<PyObject*> functions_;
  std::vector<PyObject*> captured_;  // borrowed from the glue's tuples, alive for the proof
  std::vector<PyObject*> defined_;   // likewise
};

ReadOnlyCell::Effect ClassifyBinding(std::string_view code, PyObject* globals,
                                     std::vector<std::string>* names, Ref* definitions) {
  using Effect = ReadOnlyCell::Effect;
  if (code.size() > kMaxBindingSource) return Effect::kAny;
  if (!MayBind(code)) return Effect::kAny;
  if (IntervalTimerSet()) return Effect::kAny;
  if (Hooked()) return Effect::kAny;
  if (g_prepared->scan_plain) {
    // `1 + 1`, `len(t)`: read-only without the parser.
    if (std::optional<bool> plain = PlainExpressionsReadOnly(code, globals); plain && *plain) {
      return Effect::kNothing;
    }
  }
  Ref source(PyUnicode_DecodeUTF8(code.data(), static_cast<Py_ssize_t>(code.size()), "strict"));
  if (!source) return Effect::kAny;
  Ref effects(PyObject_CallOneArg(g_prepared->effects, source.get()));
  if (!effects || !PyTuple_Check(effects.get()) || PyTuple_GET_SIZE(effects.get()) != 3) {
    return Effect::kAny;
  }
  PyObject* loaded = PyTuple_GET_ITEM(effects.get(), 0);
  PyObject* bound = PyTuple_GET_ITEM(effects.get(), 1);
  PyObject* defined = PyTuple_GET_ITEM(effects.get(), 2);
  BindingProof proof(globals);
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(defined); ++i) {
    PyObject* definition = PyTuple_GET_ITEM(defined, i);
    if (!PyTuple_Check(definition) || PyTuple_GET_SIZE(definition) != 3) return Effect::kAny;
    proof.Defines(PyTuple_GET_ITEM(definition, 0));
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(bound); ++i) {
    if (!proof.Bind(PyTuple_GET_ITEM(bound, i))) return Effect::kAny;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(loaded); ++i) {
    if (!proof.Read(PyTuple_GET_ITEM(loaded, i))) return Effect::kAny;
  }
  if (definitions != nullptr) definitions->reset(Py_NewRef(defined));
  if (proof.empty()) return Effect::kNothing;
  if (names != nullptr && !proof.Names(names)) return Effect::kAny;
  return Effect::kItsBindings;
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
  Ref methods(PyFrozenSet_New(nullptr));
  for (const char* method : BindingMethods()) {
    Ref name(PyUnicode_InternFromString(method));
    if (!methods || !name || PySet_Add(methods.get(), name.get()) < 0) {
      PyErr_Clear();
      return false;
    }
  }
  if (PyDict_SetItemString(scope.get(), "_METHODS", methods.get()) < 0 || !FunctionRecipe::Prepare()) {
    PyErr_Clear();
    return false;
  }
  Ref done(PyRun_String(kGlueSource, Py_file_input, scope.get(), scope.get()));
  if (!done) {
    PyErr_Clear();
    return false;
  }
  prepared->shape = Py_XNewRef(PyDict_GetItemString(scope.get(), "shape"));
  prepared->effects = Py_XNewRef(PyDict_GetItemString(scope.get(), "effects"));
  prepared->matching = Py_XNewRef(PyDict_GetItemString(scope.get(), "matching"));
  PyObject* get_tool = PyDict_GetItemString(scope.get(), "get_tool");  // borrowed
  if (prepared->shape == nullptr || prepared->effects == nullptr ||
      prepared->matching == nullptr || get_tool == nullptr) {
    return false;
  }
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
                                             std::vector<std::string>* names, Ref* definitions) {
  if (definitions != nullptr) definitions->reset(nullptr);
  if (g_prepared == nullptr || !PyDict_Check(globals)) return Effect::kAny;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  Effect effect = binding ? ClassifyBinding(code, globals, names, definitions)
                          : ClassifyReadOnly(code, globals);
  PyErr_Clear();
  PyErr_Restore(type, value, traceback);
  return effect;
}

bool ReadOnlyCell::Check(std::string_view code, PyObject* globals) {
  return Classify(code, globals, false, nullptr) == Effect::kNothing;
}

namespace {

// Registers with PureFunctions each function of `definitions` (the glue's
// (name, line, reads) tuples) whose body was proven, as `globals` holds it
// now: the function a def on that line of the cell `filename` made.
void RegisterLocked(PyObject* globals, PyObject* filename, PyObject* definitions) {
  if (definitions == nullptr || !PyTuple_Check(definitions) || !PyUnicode_Check(filename)) return;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(definitions); ++i) {
    PyObject* definition = PyTuple_GET_ITEM(definitions, i);
    if (!PyTuple_Check(definition) || PyTuple_GET_SIZE(definition) != 3) continue;
    PyObject* name = PyTuple_GET_ITEM(definition, 0);
    PyObject* reads = PyTuple_GET_ITEM(definition, 2);
    if (!PyTuple_Check(reads)) continue;  // None: the body was not proven
    const long line = PyLong_AsLong(PyTuple_GET_ITEM(definition, 1));
    PyObject* function = PyDict_GetItemWithError(globals, name);  // borrowed
    if (function == nullptr || !PyFunction_Check(function)) continue;
    auto* code = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(function));
    if (code->co_firstlineno != line || PyUnicode_Compare(code->co_name, name) != 0 ||
        PyUnicode_Compare(code->co_filename, filename) != 0) {
      continue;
    }
    PureFunctions::Register(reinterpret_cast<PyObject*>(code), reads);
  }
}

}  // namespace

void ReadOnlyCell::RegisterDefinitions(PyObject* globals, PyObject* filename, PyObject* definitions) {
  if (g_prepared == nullptr || !PyDict_Check(globals)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  RegisterLocked(globals, filename, definitions);
  PyErr_Clear();
  PyErr_Restore(type, value, traceback);
}

namespace {

void RegisterMatchingLocked(PyObject* globals, std::string_view filename, std::string_view source) {
  Ref name(PyUnicode_DecodeUTF8(filename.data(), static_cast<Py_ssize_t>(filename.size()), "strict"));
  Ref code(PyUnicode_DecodeUTF8(source.data(), static_cast<Py_ssize_t>(source.size()), "strict"));
  if (!name || !code) return;
  Ref found(PyObject_CallFunctionObjArgs(g_prepared->matching, code.get(), name.get(), globals, nullptr));
  if (!found || !PyTuple_Check(found.get())) return;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(found.get()); ++i) {
    PyObject* pair = PyTuple_GET_ITEM(found.get(), i);
    if (PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2) {
      PureFunctions::Register(PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1));
    }
  }
}

}  // namespace

void ReadOnlyCell::RegisterRestored(PyObject* globals) {
  if (g_prepared == nullptr || !PyDict_Check(globals)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  // Each cell whose source was registered and that defined a function the
  // namespace holds, once.
  std::set<std::string> seen;
  Py_ssize_t position = 0;
  PyObject *key, *item;  // borrowed
  while (PyDict_Next(globals, &position, &key, &item)) {
    if (!PyFunction_Check(item)) continue;
    PyObject* filename = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(item))->co_filename;
    Py_ssize_t size = 0;
    const char* text = filename != nullptr ? PyUnicode_AsUTF8AndSize(filename, &size) : nullptr;
    if (text == nullptr) {
      PyErr_Clear();
      continue;
    }
    std::string name(text, static_cast<std::size_t>(size));
    if (!seen.insert(name).second) continue;
    if (std::optional<std::string> source = RegisteredCellSource(name)) {
      seen.insert(name);
      RegisterMatchingLocked(globals, name, *source);
    }
  }
  PyErr_Clear();
  PyErr_Restore(type, value, traceback);
}

void ReadOnlyCell::InNamespaceOrder(PyObject* globals, std::vector<std::string>* names) {
  if (names->size() < 2 || !PyDict_Check(globals)) return;
  std::unordered_set<std::string_view> wanted(names->begin(), names->end());
  std::vector<std::string> ordered;
  ordered.reserve(names->size());
  ForEachStrKey(globals, [&](std::string_view name) {
    if (wanted.count(name)) ordered.emplace_back(name);
    return ordered.size() < wanted.size();
  });
  *names = std::move(ordered);
}

bool ReadOnlyCell::MarshalBindings(PyObject* globals, const std::vector<std::string>& names,
                                   std::vector<std::string>* values) {
  PyObject *type, *error, *traceback;
  PyErr_Fetch(&type, &error, &traceback);
  values->clear();
  int budget = kMaxBindingItems;
  std::size_t total = 0;
  bool ok = PyDict_Check(globals);
  for (std::size_t i = 0; ok && i < names.size(); ++i) {
    PyObject* value = PyDict_GetItemString(globals, names[i].c_str());  // borrowed
    ok = value != nullptr;
    if (!ok) break;
    std::string written;
    if (PyFunction_Check(value)) {
      // A function the cell defined: a recipe that makes it again.
      ok = FunctionRecipe::Write(value, globals, &budget, &written);
    } else {
      ok = OwnedPlain(value, &budget) != Owned::kNo;
      Ref bytes(ok ? PyMarshal_WriteObjectToString(value, Py_MARSHAL_VERSION) : nullptr);
      ok = bytes && PyBytes_Check(bytes.get());
      if (ok) written.assign(PyBytes_AS_STRING(bytes.get()), PyBytes_GET_SIZE(bytes.get()));
    }
    if (!ok) break;
    total += written.size();
    ok = total <= kMaxBindingBytes;
    if (ok) values->push_back(std::move(written));
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
    Ref value;
    if (FunctionRecipe::IsRecipe(values[i])) {
      // Made again as the cell's def made it, its cell's source registered
      // for tracebacks and its body proven again from that source.
      std::string source;
      value.reset(FunctionRecipe::Read(globals, values[i], &source));
      if (value && !source.empty()) {
        PyObject* filename = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(value.get()))->co_filename;
        Py_ssize_t size = 0;
        const char* text = PyUnicode_AsUTF8AndSize(filename, &size);
        if (PyDict_SetItemString(globals, names[i].c_str(), value.get()) < 0 || text == nullptr) {
          PyErr_Clear();
          return false;
        }
        const std::string_view name(text, static_cast<std::size_t>(size));
        RegisterCellSource(name, source);
        if (g_prepared != nullptr) RegisterMatchingLocked(globals, name, source);
        PyErr_Clear();
        continue;
      }
    } else {
      value.reset(PyMarshal_ReadObjectFromString(values[i].data(), static_cast<Py_ssize_t>(values[i].size())));
    }
    if (!value || PyDict_SetItemString(globals, names[i].c_str(), value.get()) < 0) {
      PyErr_Clear();
      return false;
    }
  }
  return true;
}

namespace {
bool g_proving = false;   // a Scope is active
bool g_unproven = false;  // Unproven() was called while it was
}  // namespace

ReadOnlyCell::Scope::Scope(bool active) : active_(active) {
  if (!active) return;
  resume_ = PyGC_Disable() != 0;
  g_proving = true;
  g_unproven = false;
}

ReadOnlyCell::Scope::~Scope() {
  if (active_) g_proving = false;
  if (resume_) PyGC_Enable();
}

bool ReadOnlyCell::Scope::unproven() const { return active_ && g_unproven; }

bool ReadOnlyCell::Proving() { return g_proving; }

void ReadOnlyCell::Unproven() {
  if (g_proving) g_unproven = true;
}

}  // namespace dolsot
