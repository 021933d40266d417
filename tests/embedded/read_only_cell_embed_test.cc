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

TEST_F(ReadOnlyCellTest, CellsThatCouldChangeMoreThanTheirNamesAreNotBindingCells) {
  py::gil_scoped_acquire gil;
  py::dict ns = Namespace();
  const char* refused[] = {
      "items += [4]",         // a list changed in place (another name may hold it)
      "table |= {'j': 2}",    // likewise a dict
      "y = 1\ny += 1",        // assigned and augmented: += would start from the cell's value
      "missing += 1",         // augmenting what is not there
      "sneaky = 1",           // letting go of an object of the session's class
      "helper = 1",           // or of a function
      "math = 1",             // or of a module
      "y = sneaky + 1",       // reading one
      "y, z = 1, 2",          // a target that is not a name
      "table.k = 1",          // an attribute
      "y: int = 1",           // an annotation
      "(y := 1)",             // a named expression
      "__builtins__ = {}",    // a dunder
      "__doc__ = 'x'",
      "for i in items: y = i",
      "if n: y = 1",
      "y = 1; del y",
      "y = lambda: 1",
      "y = open('f')",
      "items.count(1)",               // not one of the methods that change a container
      "t.append(1)",                  // a tuple
      "holder.append(1)",             // holds a function
      "items.append(helper)",         // reads one
      "items = []\nitems.append(1)",  // rebound, then changed
      "items[0].append(1)",           // a method of an item
      "y = items.pop",                // a method not called
      "items[0][0] = 1",              // a store into an item
      "name.upper()",
  };
  for (const char* code : refused) {
    EXPECT_EQ(Effect(code, ns), ReadOnlyCell::Effect::kAny) << code;
  }
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
big = list(range(300))
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
