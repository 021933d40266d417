// ReadOnlyCell::Check (embedded/read_only_cell.h): cells that provably leave
// a namespace as they found it, and every way a cell that could change it is
// told apart: by its shape, by the values it reads, by builtins rebound, by
// hooks that run code while it runs.
#include "embedded/read_only_cell.h"

#include <gtest/gtest.h>
#include <pybind11/embed.h>
#include <sys/time.h>

#include <algorithm>
#include <string>
#include <vector>

namespace py = pybind11;

namespace dolsot {
namespace {

// A session-like namespace: atoms, containers, a module, a function, a
// subclass of int, a tuple holding a list.
py::dict Namespace() {
  py::dict ns;
  py::exec(R"PY(
import builtins
__builtins__ = builtins
n = 41
s = 'abc'
f = 2.5
t = (1, 'two', (3.0, None, b'x'), frozenset({4, 5}), range(3))
nothing = None
items = [1, 2, 3]
table = {'k': 1}
import math
def helper():
    return 1
class Sneaky(int):
    def __add__(self, other):
        import os
        return 0
sneaky = Sneaky(1)
mixed = (1, [2], {3: {4}}, bytearray(b'5'))
holder = [1, helper]
keyed = {'k': math}
wide = tuple(range(1000))
long_list = list(range(300))
)PY", ns);
  return ns;
}

bool ReadOnly(const std::string& code, const py::dict& ns) {
  return ReadOnlyCell::Check(code, ns.ptr());
}

class ReadOnlyCellTest : public ::testing::Test {
 protected:
  void SetUp() override {
    py::gil_scoped_acquire gil;
    ASSERT_TRUE(ReadOnlyCell::Prepare());
  }
};

TEST_F(ReadOnlyCellTest, ExpressionsOverImmutableValuesAreReadOnly) {
  py::gil_scoped_acquire gil;
  py::dict ns = Namespace();
  for (const char* code : {
           "1 + 1", "n * 2", "n", "s[1:]", "print(n, s, len(s))", "t[2][0] + f",
           "[i * n for i in range(3)]", "{k: v for k, v in zip(s, range(3))}",
           "sorted(t[3], key=abs)", "f'{s!r:>10} {n:04d}'", "max(n, 3) if s else -n",
           "sum(x for x in range(10) if x % 2)", "print(*t, sep=', ')", "pass", "",
           "not nothing and n > 3", "divmod(n, 7); pow(2, 10)", "dict(a=1) | {'b': n}",
           "[x for x in t[4]]", "repr(t)", "isinstance(n, int)", "s * 3, -f, ~n",
           "[*range(3), *s]", "{**{'a': 1}}", "list(map(str, range(3)))", "n  # comment",
           // builtin containers of such values, read
           "items", "len(items)", "items[-1] + table['k']", "sorted(items, reverse=True)",
           "print(mixed)", "{k: table[k] for k in table}"}) {
    EXPECT_TRUE(ReadOnly(code, ns)) << code;
  }
}

TEST_F(ReadOnlyCellTest, CellsThatCouldChangeStateAreNot) {
  py::gil_scoped_acquire gil;
  py::dict ns = Namespace();
  for (const char* code : {
           // binds, deletes, imports, defines, loops, awaits
           "x = 1", "n += 1", "del n", "import os", "from math import pi", "def g(): pass",
           "class C: pass", "for i in range(3): pass", "while False: pass",
           "with open('x') as fh: pass", "try:\n    pass\nexcept Exception:\n    pass",
           "global n", "lambda: 0", "[y := 1]", "(i for i in range(3)); z = 1", "await n",
           "str(b'x', 'cp1252')", "bytes(s, encoding='cp1252')",  // a codec lookup may import
           "assert n", "raise ValueError", "if n: pass",
           // attributes, and what reaches them
           "s.upper()", "n.real", "math.pi", "getattr(n, 'real')", "vars()", "globals()",
           "dir()", "__import__('os')", "eval('1')", "exec('1')", "compile('1', 'x', 'eval')",
           "open('/dev/null')", "input()", "breakpoint()", "type(n)", "help()",
           // values that are not immutable all the way down
           "helper()", "math", "sneaky + 1", "holder", "len(holder)", "keyed", "wide",
           "long_list", "items.append(4)", "items[0] = 2", "table.update(a=1)", "items += [1]",
           // a comprehension variable named like a global that is not a builtin value
           "[holder for holder in range(3)]",
           // names nobody defined
           "undefined_name", "n + undefined_name",
           // not Python, or too long to check
           "1 +", "\xff"}) {
    EXPECT_FALSE(ReadOnly(code, ns)) << code;
  }
  EXPECT_FALSE(ReadOnly("n + " + std::string(1100, '1'), ns));
  EXPECT_FALSE(ReadOnly(std::string(1100, ' ') + "\n1", ns));
}

TEST_F(ReadOnlyCellTest, ABuiltinRebound_InTheNamespaceOrInBuiltins_IsNotTrusted) {
  py::gil_scoped_acquire gil;
  py::dict ns = Namespace();
  EXPECT_TRUE(ReadOnly("len(s)", ns));
  ns["len"] = py::eval("lambda value: 0");
  EXPECT_FALSE(ReadOnly("len(s)", ns));
  // A private builtins dict whose `len` is another builtin under that name.
  py::dict own_builtins = py::module_::import("builtins").attr("__dict__").attr("copy")();
  own_builtins["len"] = own_builtins["exec"];
  own_builtins["abs"] = py::eval("lambda value: value");
  py::dict other = Namespace();
  other["__builtins__"] = own_builtins;
  EXPECT_FALSE(ReadOnly("len(s)", other));
  EXPECT_FALSE(ReadOnly("abs(n)", other));
  EXPECT_TRUE(ReadOnly("min(n, 2)", other));
}

TEST_F(ReadOnlyCellTest, TraceFunctionsAndTimersMakeNoCellReadOnly) {
  py::gil_scoped_acquire gil;
  py::dict ns = Namespace();
  py::module_ sys = py::module_::import("sys");
  sys.attr("settrace")(py::eval("lambda *args: None"));
  EXPECT_FALSE(ReadOnly("1 + 1", ns));
  sys.attr("settrace")(py::none());
  sys.attr("setprofile")(py::eval("lambda *args: None"));
  EXPECT_FALSE(ReadOnly("1 + 1", ns));
  sys.attr("setprofile")(py::none());
  EXPECT_TRUE(ReadOnly("1 + 1", ns));
  itimerval timer{};
  timer.it_value.tv_sec = 1000;
  ASSERT_EQ(::setitimer(ITIMER_VIRTUAL, &timer, nullptr), 0);
  EXPECT_FALSE(ReadOnly("1 + 1", ns));
  timer = itimerval{};
  ASSERT_EQ(::setitimer(ITIMER_VIRTUAL, &timer, nullptr), 0);
  EXPECT_TRUE(ReadOnly("1 + 1", ns));
}

TEST_F(ReadOnlyCellTest, ThePythonErrorIndicatorIsLeftAsItWas) {
  py::gil_scoped_acquire gil;
  py::dict ns = Namespace();
  PyErr_SetString(PyExc_KeyError, "kept");
  EXPECT_FALSE(ReadOnly("1 +", ns));
  EXPECT_TRUE(ReadOnly("1 + 1", ns));
  ASSERT_TRUE(PyErr_ExceptionMatches(PyExc_KeyError));
  PyErr_Clear();
}

TEST_F(ReadOnlyCellTest, TheScopePausesTheCollectorOnlyWhenAsked) {
  py::gil_scoped_acquire gil;
  ASSERT_EQ(PyGC_IsEnabled(), 1);
  {
    ReadOnlyCell::Scope paused(true);
    EXPECT_EQ(PyGC_IsEnabled(), 0);
  }
  EXPECT_EQ(PyGC_IsEnabled(), 1);
  {
    ReadOnlyCell::Scope untouched(false);
    EXPECT_EQ(PyGC_IsEnabled(), 1);
  }
}


// Binding cells: what Classify proves with `binding`, and what
// MarshalBindings then vouches for (the values run, as the runner does).
ReadOnlyCell::Effect Effect(const std::string& code, const py::dict& ns,
                            std::vector<std::string>* names = nullptr) {
  std::vector<std::string> ignored;
  return ReadOnlyCell::Classify(code, ns.ptr(), true, names ? names : &ignored);
}

TEST_F(ReadOnlyCellTest, BindingCellsAreProvenAndNameWhatTheyBind) {
  py::gil_scoped_acquire gil;
  py::dict ns = Namespace();
  const char* binding[] = {
      "y = 1", "n += 1", "s += 'd'", "t2 = (n, s)", "a = b = [n, s]", "d = {'k': n}",
      "y = len(items)\ny", "z = sorted(items)", "n = n * 2", "y = [i for i in items]",
      "items = [0]", "y = None", "fresh = 1\nfresh + 1", "q = {1, 2}",
      // In place, on a list, dict or set of atoms the namespace holds.
      "items.append(4)", "table['j'] = 2", "items[0] += 1", "table.update({'j': n})",
      "items.sort(reverse=True)", "items.pop()\nitems.extend([n, s])"};
  for (const char* code : binding) {
    EXPECT_EQ(Effect(code, ns), ReadOnlyCell::Effect::kItsBindings) << code;
  }
  std::vector<std::string> names;
  ASSERT_EQ(Effect("a = b = 1\nn += 2\nn\ntable['k'] = n", ns, &names),
            ReadOnlyCell::Effect::kItsBindings);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "n", "table"}));
  // Without `binding`, Check's answer.
  EXPECT_EQ(ReadOnlyCell::Classify("y = 1", ns.ptr(), false, &names), ReadOnlyCell::Effect::kAny);
  EXPECT_EQ(Effect("n + 1", ns), ReadOnlyCell::Effect::kNothing);
}

TEST_F(ReadOnlyCellTest, LoopsBranchesAndChangesOfWhatTheNamespaceAloneHoldsAreBindingCells) {
  py::gil_scoped_acquire gil;
  py::dict ns = Namespace();
  // Each changes only names whose values a copy then carries: the names it
  // binds, and the mutable values it reads (which the namespace alone holds).
  const char* binding[] = {
      "items += [4]", "table |= {'j': 2}", "y = 1\ny += 1", "y, z = 1, 2",
      "for i in items: y = i", "if n: y = 1", "items = []\nitems.append(1)",
      "items[0][0] = 1",  // a TypeError when it runs (an int): then the general path
      "acc = 0\nfor i in range(1000):\n    acc += i * i % 7\nacc",
      "out = []\nfor w in s.split('b'):\n    if w:\n        out.append(w.upper())\n    else:\n        continue",
      "k = 0\nwhile k < 10:\n    k += 1\n    if k > 5: break",
      "helper = 1",  // lets a plain function go: no finalizer runs
      "grid = [[0] * 3 for _ in range(3)]\ngrid[1][2] = n",
      "top = sorted(table.items(), key=lambda kv: -kv[1])[:3]", "y = lambda: 1"};
  for (const char* code : binding) {
    EXPECT_EQ(Effect(code, ns), ReadOnlyCell::Effect::kItsBindings) << code;
  }
  std::vector<std::string> names;
  ASSERT_EQ(Effect("for i in range(3):\n    items.append(i)", ns, &names), ReadOnlyCell::Effect::kItsBindings);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"i", "items"}));
}

TEST_F(ReadOnlyCellTest, CellsThatCouldChangeMoreThanTheirNamesAreNotBindingCells) {
  py::gil_scoped_acquire gil;
  py::exec("__builtins__.__dict__.setdefault('shared_x', 1)");
  py::dict ns = Namespace();
  py::exec(R"PY(
alias_a = alias_b = [1]
nested = [[1], [2]]
inner = nested[0]
import weakref
watched = {1, 2}
watcher = weakref.ref(watched)
)PY", ns);
  const char* refused[] = {
      "sneaky = 1",           // letting go of an object of the session's class
      "math = 1",             // or of a module
      "y = sneaky + 1",       // reading one
      "y = math",
      "table.k = 1",          // an attribute
      "y: int = 1",           // an annotation
      "(y := 1)",             // a named expression
      "__builtins__ = {}",    // a dunder
      "__doc__ = 'x'",
      "y = 1; del y",
      "y = open('f')",
      "t.count(1).real",      // an attribute not called
      "y = items.pop",        // a method not called
      "y = s.format(n)",      // not one of the methods
      "y = str(b'x', 'utf-8')",  // a codec lookup
      "t.append(1)\nimport os",
      "holder.append(1)",     // holds a function
      "items.append(helper)",  // reads one whose body was never proven
      "helper()",
      "alias_a.append(1)",    // a list another name holds too
      "y = alias_a",
      "nested[0].append(3)",  // a list whose item another name holds
      "watched.add(3)",       // a set a weak reference watches
      "watched = 0",          // letting it go runs the weak reference's callback
      "y = len(watched)",
      // Builtins the proof does not trust, read before the cell binds the name.
      "exec('items.append(1)'); exec = 0",
      "[exec('items.append(1)') for exec in [exec]]",
      "y = [setattr for setattr in (1,)]",
      "y = sorted(items, key=lambda v: math.floor(v))",  // a lambda's body reads a module
      "y = (lambda: exec('items.append(1)'))()",
      "shared_x = 2\ny = shared_x",
      // A def's function called (or read) in the cell that makes it: its
      // body is proven only after the cell, if at all.
      "def g():\n    import os\n    os.environ['X'] = '1'\ng()",
      "def g():\n    return 1\ny = g()",
      "def g():\n    return 1\ny = [g]",
      "def g():\n    return 1\ndef h(k=g):\n    return k",
      // A def's function called (or read) in the cell that makes it: its
      // body is proven only after the cell, if at all.
      "def g():\n    import os\n    os.environ['X'] = '1'\ng()",
      "def g():\n    return 1\ny = g()",
      "def g():\n    return 1\ny = [g]",
      "def g():\n    return 1\ndef h(k=g):\n    return k",
      "class C: pass",
      "@staticmethod\ndef f(): pass",
      "def f(x=sneaky): pass",
      "def f(x: math.pi): pass",
      "try:\n    y = 1\nexcept Exception:\n    pass",
      "with x: pass",
      "import math",
      "global n\nn = 1",
  };
  for (const char* code : refused) {
    EXPECT_EQ(Effect(code, ns), ReadOnlyCell::Effect::kAny) << code;
  }
  py::exec("del __builtins__.__dict__['shared_x']");
}

// A def is a binding cell (its body does not run); a function whose body
// was proven when its def ran may be called by a later cell's proof, as
// long as it and what it reads are still as proven.
TEST_F(ReadOnlyCellTest, ProvenFunctionsMayBeCalledAndTheRestMayNot) {
  py::gil_scoped_acquire gil;
  py::dict ns = Namespace();
  auto define = [&](const std::string& code, const std::string& filename) {
    Ref definitions;
    std::vector<std::string> names;
    auto effect = ReadOnlyCell::Classify(code, ns.ptr(), true, &names, &definitions);
    // Run as RunCell runs it, under its own filename.
    py::object compiled = py::module_::import("builtins").attr("compile")(code, filename, "exec");
    py::module_::import("builtins").attr("exec")(compiled, ns);
    ReadOnlyCell::RegisterDefinitions(ns.ptr(), py::str(filename).ptr(), definitions.get());
    return effect;
  };
  EXPECT_EQ(define("def double(x):\n    return x * 2", "<cell 1>"), ReadOnlyCell::Effect::kItsBindings);
  EXPECT_EQ(define("def fib(k):\n    return k if k < 2 else fib(k - 1) + fib(k - 2)", "<cell 2>"),
            ReadOnlyCell::Effect::kItsBindings);
  EXPECT_EQ(define("def total(xs, start=0):\n    acc = start\n    for x in xs:\n        acc += double(x)\n"
                   "    return acc",
                   "<cell 3>"),
            ReadOnlyCell::Effect::kItsBindings);
  EXPECT_EQ(define("def push(x):\n    items.append(x)\n    return len(items)", "<cell 4>"),
            ReadOnlyCell::Effect::kItsBindings);
  // Bodies that are not proven: a def the proof still lets the cell make.
  EXPECT_EQ(define("def imports():\n    import os\n    return os.getpid()", "<cell 5>"),
            ReadOnlyCell::Effect::kItsBindings);
  EXPECT_EQ(define("def sets_global():\n    global n\n    n = 0", "<cell 6>"), ReadOnlyCell::Effect::kItsBindings);
  EXPECT_EQ(define("def reads_module():\n    return math.pi", "<cell 7>"), ReadOnlyCell::Effect::kItsBindings);
  EXPECT_EQ(define("def mutable_default(x, acc=[]):\n    acc.append(x)\n    return acc", "<cell 8>"),
            ReadOnlyCell::Effect::kItsBindings);  // made; not callable by a proof (below)
  EXPECT_EQ(Effect("y = double(21)", ns), ReadOnlyCell::Effect::kItsBindings);
  EXPECT_EQ(Effect("fib(10)", ns), ReadOnlyCell::Effect::kNothing);
  EXPECT_EQ(Effect("total([1, 2, 3])", ns), ReadOnlyCell::Effect::kNothing);
  std::vector<std::string> names;
  ASSERT_EQ(Effect("push(5)", ns, &names), ReadOnlyCell::Effect::kItsBindings);
  EXPECT_EQ(names, (std::vector<std::string>{"items"}));  // what its body changes, through a global
  for (const char* code : {"imports()", "sets_global()", "reads_module()", "mutable_default(1)",
                           "y = [imports]",
                           "y = sorted(items, key=imports)"}) {
    EXPECT_EQ(Effect(code, ns), ReadOnlyCell::Effect::kAny) << code;
  }
  // A proven function that reads a name a def of the cell binds: that
  // function's body is unproven while the cell runs.
  EXPECT_EQ(define("def calls_later():\n    return later()", "<cell 9>"), ReadOnlyCell::Effect::kItsBindings);
  // `later` bound nowhere: calling it raises NameError, which changes nothing.
  EXPECT_EQ(Effect("y = calls_later()", ns), ReadOnlyCell::Effect::kItsBindings);
  EXPECT_EQ(Effect("def later():\n    import os\n    os.x = 1\ncalls_later()", ns), ReadOnlyCell::Effect::kAny);
  // Changed after its proof: a default made mutable, a global it reads
  // rebound to a module, its code replaced.
  py::exec("double.__defaults__ = ([],)", ns);
  EXPECT_EQ(Effect("double(1)", ns), ReadOnlyCell::Effect::kAny);
  EXPECT_EQ(Effect("total([1])", ns), ReadOnlyCell::Effect::kAny);  // reads double
  py::exec("double.__defaults__ = None\nfib.__code__ = imports.__code__", ns);
  EXPECT_EQ(Effect("double(1)", ns), ReadOnlyCell::Effect::kNothing);
  EXPECT_EQ(Effect("fib(1)", ns), ReadOnlyCell::Effect::kAny);
  py::exec("items = math", ns);
  EXPECT_EQ(Effect("push(1)", ns), ReadOnlyCell::Effect::kAny);
}

TEST_F(ReadOnlyCellTest, OnlyValuesACopyStandsForAreMarshalledAndTheyReadBackEqual) {
  py::gil_scoped_acquire gil;
  py::dict ns = Namespace();
  py::exec(R"PY(
own_list = [1, 'a', (2.5, None), {'k': [3]}]
own_set = {1, 2}
nested_tuple = ([1], 2)
alias_a = alias_b = [1]
in_tuple = (items,)
in_list = [items]
r = range(3)
ba = bytearray(b'x')
big = list(range(5000))
atoms = (1, 2.0, 3j, 'four', b'five', True, None, frozenset({6}))
)PY", ns);
  std::vector<std::string> values;
  for (const char* name : {"own_list", "own_set", "nested_tuple", "atoms", "n", "s"}) {
    ASSERT_TRUE(ReadOnlyCell::MarshalBindings(ns.ptr(), {name}, &values)) << name;
    ASSERT_EQ(values.size(), 1u);
    py::dict replay;
    ASSERT_TRUE(ReadOnlyCell::ApplyBindings(replay.ptr(), {name}, values)) << name;
    EXPECT_TRUE(replay[name].equal(ns[name])) << name;
  }
  // Aliased (two names, or a list of the session's inside), not marshal's, too big.
  for (const char* name : {"alias_a", "in_tuple", "in_list", "r", "ba", "big", "helper", "sneaky"}) {
    EXPECT_FALSE(ReadOnlyCell::MarshalBindings(ns.ptr(), {name}, &values)) << name;
    EXPECT_TRUE(values.empty()) << name;
  }
  EXPECT_FALSE(ReadOnlyCell::MarshalBindings(ns.ptr(), {"unbound"}, &values));
  // A value that does not read back is refused whole.
  py::dict replay;
  EXPECT_FALSE(ReadOnlyCell::ApplyBindings(replay.ptr(), {"x"}, {std::string("\xff\x00", 2)}));
  EXPECT_FALSE(PyErr_Occurred());
}

}  // namespace
}  // namespace dolsot

namespace dolsot {
namespace {

// Functions a binding cell defined travel as recipes (function_recipe.h):
// only those nothing else can tell from their copy, and the copy reads back
// as the same function.
TEST_F(ReadOnlyCellTest, OnlyFunctionsACopyStandsForTravelAsRecipes) {
  py::gil_scoped_acquire gil;
  py::dict ns;
  py::exec(R"PY(
import builtins
__builtins__ = builtins
def plain(x: int, *, k: list[int] | None = None) -> str:
    'Doc.'
    return str(x) * 2
def aliased(x):
    return x
other = aliased
def with_doc(x):
    return x
with_doc.__doc__ = 5
def with_attribute(x):
    return x
with_attribute.tag = 1
def mutable_default(x, acc=[]):
    return acc
def outer():
    y = 1
    def inner():
        return y
    return inner
closure = outer()
class Marker:
    pass
def odd_annotation(x: Marker):
    return x
)PY", ns);
  std::vector<std::string> values;
  ASSERT_TRUE(ReadOnlyCell::MarshalBindings(ns.ptr(), {"plain"}, &values));
  py::dict copy;
  copy["__builtins__"] = ns["__builtins__"];
  ASSERT_TRUE(ReadOnlyCell::ApplyBindings(copy.ptr(), {"plain"}, values));
  py::object made = copy["plain"];
  EXPECT_FALSE(made.is(ns["plain"]));
  EXPECT_EQ(made(21).cast<std::string>(), "2121");
  for (const char* attribute : {"__doc__", "__qualname__", "__name__", "__defaults__", "__kwdefaults__"}) {
    EXPECT_TRUE(made.attr(attribute).equal(ns["plain"].attr(attribute))) << attribute;
  }
  EXPECT_EQ(py::repr(made.attr("__annotations__")).cast<std::string>(),
            py::repr(ns["plain"].attr("__annotations__")).cast<std::string>());
  EXPECT_EQ(made.attr("__globals__").ptr(), copy.ptr());
  for (const char* name : {"aliased", "with_doc", "with_attribute", "mutable_default", "closure",
                           "odd_annotation"}) {
    EXPECT_FALSE(ReadOnlyCell::MarshalBindings(ns.ptr(), {name}, &values)) << name;
  }
  // Bytes that are no recipe this interpreter reads are refused whole.
  EXPECT_FALSE(ReadOnlyCell::ApplyBindings(copy.ptr(), {"x"}, {std::string("\0garbage", 8)}));
  EXPECT_FALSE(PyErr_Occurred());
}

}  // namespace
}  // namespace dolsot
