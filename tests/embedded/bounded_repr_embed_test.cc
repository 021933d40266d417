// Specification of the bounded repr (embedded/bounded_repr.h): Python's own
// repr when it fits; the shape (type, length, first and last items) within
// the budget when it does not, never building the whole repr first.
#include "embedded/bounded_repr.h"

#include <gtest/gtest.h>
#include <pybind11/embed.h>

#include <string>

#include "core/bounded_text.h"

namespace py = pybind11;

namespace dolsot {
namespace {

std::string Repr(const char* expression, std::size_t max_chars = kDefaultMaxRepr) {
  ReprLimits limits;
  limits.max_chars = max_chars;
  py::object value = py::eval(expression, py::globals());
  std::string out = BoundedRepr(value.ptr(), limits);
  EXPECT_FALSE(PyErr_Occurred()) << expression;
  return out;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(BoundedRepr, WhatFitsIsPythonsOwnRepr) {
  py::gil_scoped_acquire gil;
  py::exec(R"PY(
class Point:
    def __repr__(self):
        return "Point(1, 2)"
class MyList(list):
    pass
class MySet(set):
    pass
)PY", py::globals());
  const char* cases[] = {
      "[1, 'a', (2,), {3: [4]}, {5}, frozenset({6}), set(), frozenset(), (), [], {}]",
      "{'k': {'n': [1.5, None, True]}, (1, 2): b'x', 'u': 'caf\\u00e9'}",
      "list(range(100))",
      "'x' * 3990",
      "bytearray(b'ab')",
      "Point()",
      "MyList([1, 2])",
      "MySet([1])",
      "MySet()",
      "(1,)",
  };
  for (const char* expression : cases) {
    std::string expected = py::repr(py::eval(expression, py::globals()));
    EXPECT_EQ(Repr(expression), expected) << expression;
  }
}

TEST(BoundedRepr, AHugeListShowsItsFirstAndLastItemsAndItsLength) {
  py::gil_scoped_acquire gil;
  std::string out = Repr("list(range(10**6))");
  EXPECT_LE(CountCodePoints(out), kDefaultMaxRepr);
  EXPECT_EQ(out.rfind("[0, 1, 2, 3, ", 0), 0u) << out;
  EXPECT_TRUE(Contains(out, "999998, 999999]")) << out;
  EXPECT_TRUE(Contains(out, "... 999900 more items ...")) << out;
  EXPECT_TRUE(Contains(out, "  # list of 1000000 items, shortened")) << out;
}

TEST(BoundedRepr, AHugeDictShowsItsFirstAndLastItems) {
  py::gil_scoped_acquire gil;
  std::string out = Repr("{i: str(i) for i in range(100000)}");
  EXPECT_LE(CountCodePoints(out), kDefaultMaxRepr);
  EXPECT_EQ(out.rfind("{0: '0', 1: '1', ", 0), 0u) << out;
  EXPECT_TRUE(Contains(out, "99999: '99999'}")) << out;
  EXPECT_TRUE(Contains(out, "more items ...")) << out;
  EXPECT_TRUE(Contains(out, "# dict of 100000 items, shortened")) << out;
}

TEST(BoundedRepr, AHugeStringKeepsItsHeadAndTail) {
  py::gil_scoped_acquire gil;
  std::string out = Repr("'a' * 50_000_000 + 'END'", 300);
  EXPECT_LE(CountCodePoints(out), 300u) << out;
  EXPECT_EQ(out.rfind("'aaaa", 0), 0u) << out;
  EXPECT_TRUE(Contains(out, "aEND'")) << out;
  EXPECT_TRUE(Contains(out, "more characters ...")) << out;
  EXPECT_TRUE(Contains(out, "# str of 50000003 characters, shortened")) << out;
  std::string bytes = Repr("b'z' * 10_000_000", 100);
  EXPECT_EQ(bytes.rfind("b'zzz", 0), 0u) << bytes;
  EXPECT_TRUE(Contains(bytes, "more bytes ...")) << bytes;
  EXPECT_TRUE(Contains(bytes, "bytes of 10000000 bytes")) << bytes;
}

TEST(BoundedRepr, NestingIsBoundedInDepthItemsAndStringLength) {
  py::gil_scoped_acquire gil;
  py::exec("deep = []\nx = deep\nfor _ in range(50):\n    x.append([]); x = x[0]\n", py::globals());
  std::string deep = Repr("deep");
  EXPECT_TRUE(Contains(deep, "<list of 1 item>")) << deep;
  EXPECT_LT(deep.size(), 200u) << deep;
  // Every inner string is cut to its own bound, so the outer list still
  // shows its first and last items.
  std::string strings = Repr("['x' * 100000 for _ in range(3)]");
  EXPECT_LE(CountCodePoints(strings), kDefaultMaxRepr);
  EXPECT_EQ(strings.rfind("['xxx", 0), 0u) << strings;
  EXPECT_TRUE(Contains(strings, "xxx']  # list of 3 items, shortened")) << strings;
  std::string wide = Repr("[list(range(1000)) for _ in range(1000)]");
  EXPECT_LE(CountCodePoints(wide), kDefaultMaxRepr);
  EXPECT_TRUE(Contains(wide, "997, 998, 999]]")) << "the last item's last items";
}

TEST(BoundedRepr, SelfReferenceIsShownAsPythonShowsIt) {
  py::gil_scoped_acquire gil;
  py::exec("loop = [1]\nloop.append(loop)\nself_dict = {}\nself_dict['me'] = self_dict\n",
           py::globals());
  EXPECT_EQ(Repr("loop"), "[1, [...]]");
  EXPECT_EQ(Repr("self_dict"), "{'me': {...}}");
}

void DefineHuge() {
  py::exec(R"PY(
class Huge:
    def __repr__(self):
        return "<" + "h" * 10_000_000 + ">"
)PY", py::globals());
}

TEST(BoundedRepr, AnObjectsOwnHugeReprIsCutInTheMiddle) {
  py::gil_scoped_acquire gil;
  DefineHuge();
  std::string out = Repr("Huge()");
  EXPECT_LE(CountCodePoints(out), kDefaultMaxRepr);
  EXPECT_EQ(out.rfind("<hhh", 0), 0u);
  EXPECT_TRUE(out.ends_with("hhh>")) << out.substr(out.size() - 40);
  EXPECT_TRUE(Contains(out, "more characters ...")) << out.substr(0, 40);
}

TEST(BoundedRepr, AReprThatRaisesIsNamedNotRaised) {
  py::gil_scoped_acquire gil;
  py::exec(R"PY(
class Broken:
    def __repr__(self):
        raise RuntimeError("nope")
)PY", py::globals());
  std::string out = Repr("[Broken()]");
  EXPECT_TRUE(Contains(out, "<repr of Broken object failed: RuntimeError: nope>")) << out;
}

TEST(BoundedRepr, ZeroMeansNoCap) {
  py::gil_scoped_acquire gil;
  EXPECT_EQ(Repr("list(range(3000))", 0), std::string(py::repr(py::eval("list(range(3000))"))));
}

TEST(BoundedRepr, EveryBudgetIsKeptEvenATinyOne) {
  py::gil_scoped_acquire gil;
  DefineHuge();
  for (std::size_t budget : {1u, 5u, 20u, 47u, 90u, 200u, 1000u}) {
    for (const char* expression : {"list(range(10**5))", "'\\u00e9' * 10**5", "{i: [i] * 50 for i in range(999)}",
                                   "b'\\x00' * 5000", "Huge()"}) {
      std::string out = Repr(expression, budget);
      EXPECT_LE(CountCodePoints(out), budget) << expression << " in " << budget << ": " << out;
    }
  }
}

}  // namespace
}  // namespace dolsot
