// Tests for toolbox hints and exit codes (embedded/toolbox_hints.h), inside one
// embedded interpreter: cell code is exec'd in a dict holding the toolbox
// alias, and the exception it raises is handed to ToolboxCallHint.
#include "embedded/toolbox_hints.h"

#include <gtest/gtest.h>
#include <pybind11/embed.h>

#include <string>

namespace py = pybind11;

namespace dolsot {
namespace {

// examples/toolbox, from CMake: __FILE__ is relative under ccache's base_dir.
std::string ToolboxDir() { return DOLSOT_EXAMPLE_TOOLBOX_DIR; }

class ToolboxHints : public ::testing::Test {
 protected:
  void SetUp() override {
    py::gil_scoped_acquire gil;
    py::list path = py::module_::import("sys").attr("path");
    if (!path.contains(ToolboxDir())) path.insert(0, ToolboxDir());
  }

  // A fresh session namespace with `import mytools as mt` (and `extra` run).
  static py::dict Namespace(const std::string& extra = "") {
    py::dict globals;
    py::exec("import mytools as mt\n" + extra, globals);
    return globals;
  }

  // Runs `code` as a cell in `globals`; returns the exception it raised, its
  // __traceback__ set (as the cell runner hands it over).
  static py::object Raise(const std::string& code, py::dict globals) {
    try {
      py::object compiled = py::module_::import("builtins")
                                .attr("compile")(code, "<cell 1>", "exec");
      py::module_::import("builtins").attr("exec")(compiled, globals);
    } catch (py::error_already_set& e) {
      if (!e.trace().is_none()) PyException_SetTraceback(e.value().ptr(), e.trace().ptr());
      return e.value();
    }
    return py::none();
  }

  static std::optional<std::string> Hint(const std::string& code, py::dict globals,
                                         std::vector<std::string> aliases = {"mt"}) {
    py::object exc = Raise(code, globals);
    EXPECT_FALSE(exc.is_none()) << "the cell did not raise: " << code;
    return ToolboxCallHint(exc.ptr(), globals.ptr(), aliases);
  }
};

TEST_F(ToolboxHints, MissingArgumentShowsSignatureAndHelp) {
  py::gil_scoped_acquire gil;
  auto hint = Hint("mt.add(1)", Namespace());
  ASSERT_TRUE(hint.has_value());
  EXPECT_EQ(*hint, "hint: mt.add(a: int, b: int) -> int; see mt.help(\"add\")");
}

TEST_F(ToolboxHints, EveryArgumentBindingErrorGetsAHint) {
  py::gil_scoped_acquire gil;
  for (const char* code : {"mt.add(1, 2, 3)", "mt.load(nme='orders')", "mt.add(1, a=2)",
                           "mt.tables(1)", "mt.top()"}) {
    auto hint = Hint(code, Namespace());
    ASSERT_TRUE(hint.has_value()) << code;
    EXPECT_EQ(hint->rfind("hint: mt.", 0), 0u) << *hint;
  }
  auto top = Hint("mt.top()", Namespace());
  EXPECT_EQ(*top,
            "hint: mt.top(rows: list[dict[str, Any]], n: int = 3, key: str = 'qty') -> "
            "list[dict[str, Any]]; see mt.help(\"top\")");
}

TEST_F(ToolboxHints, CallFromAFunctionTheCellDefinedGetsAHint) {
  py::gil_scoped_acquire gil;
  auto hint = Hint("def f():\n    return mt.add(1)\nf()\n", Namespace());
  ASSERT_TRUE(hint.has_value());
  EXPECT_NE(hint->find("mt.add(a: int, b: int)"), std::string::npos);
}

TEST_F(ToolboxHints, NoHelpCallableMeansNoHelpPart) {
  py::gil_scoped_acquire gil;
  py::dict globals;
  py::exec(
      "import types\n"
      "tb = types.ModuleType('tb')\n"
      "exec('def scale(x: float, k: float = 2.0) -> float:\\n    return x * k\\n', "
      "tb.__dict__)\n",
      globals);
  auto hint = Hint("tb.scale()", globals, {"tb"});
  ASSERT_TRUE(hint.has_value());
  EXPECT_EQ(*hint, "hint: tb.scale(x: float, k: float = 2.0) -> float");
}

TEST_F(ToolboxHints, NamesOutsideAllGetNoHint) {
  py::gil_scoped_acquire gil;
  py::dict globals = Namespace("mt._private = lambda a: a\n");
  EXPECT_FALSE(Hint("mt._private()", globals).has_value());
}

TEST_F(ToolboxHints, OtherErrorsGetNoHint) {
  py::gil_scoped_acquire gil;
  EXPECT_FALSE(Hint("mt.add(1, 'x')", Namespace()).has_value());  // TypeError, not binding
  EXPECT_FALSE(Hint("mt.load('nope')", Namespace()).has_value());  // NotFound
  EXPECT_FALSE(Hint("len(1, 2)", Namespace()).has_value());        // not a toolbox function
  EXPECT_FALSE(Hint("mt.add(1)", Namespace(), {}).has_value());    // no alias given
}

TEST_F(ToolboxHints, TheCellsOwnFunctionOfTheSameNameGetsNoHint) {
  py::gil_scoped_acquire gil;
  py::dict globals = Namespace("def add(x):\n    return x\n");
  EXPECT_FALSE(Hint("add()", globals).has_value());
}

TEST_F(ToolboxHints, ABindingErrorInsideTheToolboxGetsNoHint) {
  py::gil_scoped_acquire gil;
  py::dict globals;
  py::exec(
      "import types\n"
      "tb = types.ModuleType('tb')\n"
      "exec('def inner(a, b):\\n    return a\\ndef outer():\\n    return inner(1)\\n', "
      "tb.__dict__)\n",
      globals);
  // inner() is public, but the bad call is the toolbox's own, not the cell's.
  EXPECT_FALSE(Hint("tb.outer()", globals, {"tb"}).has_value());
  EXPECT_TRUE(Hint("tb.inner(1)", globals, {"tb"}).has_value());
}

TEST_F(ToolboxHints, APendingErrorIsKeptAndNothingIsRaised) {
  py::gil_scoped_acquire gil;
  py::dict globals = Namespace();
  py::object exc = Raise("mt.add(1)", globals);
  PyErr_SetString(PyExc_RuntimeError, "pending");
  auto hint = ToolboxCallHint(exc.ptr(), globals.ptr(), {"mt"});
  EXPECT_TRUE(hint.has_value());
  ASSERT_TRUE(PyErr_Occurred() != nullptr);
  EXPECT_TRUE(PyErr_ExceptionMatches(PyExc_RuntimeError));
  PyErr_Clear();
  // Not an exception, not a dict: no hint, no error.
  EXPECT_FALSE(ToolboxCallHint(Py_None, globals.ptr(), {"mt"}).has_value());
  EXPECT_FALSE(ToolboxCallHint(exc.ptr(), Py_None, {"mt"}).has_value());
  EXPECT_FALSE(PyErr_Occurred());
}

TEST_F(ToolboxHints, ToolboxExceptionsCarryTheirExitCodes) {
  py::gil_scoped_acquire gil;
  py::dict globals = Namespace();
  auto not_found = ExceptionExitCode(Raise("mt.load('nope')", globals).ptr());
  auto tool_error = ExceptionExitCode(Raise("mt.top([], -1)", globals).ptr());
  auto plain = ExceptionExitCode(Raise("1 / 0", globals).ptr());
  auto boolean = ExceptionExitCode(
      Raise("class E(Exception):\n    exit_code = True\nraise E()", globals).ptr());
  EXPECT_EQ(not_found, 4);
  EXPECT_EQ(tool_error, 3);
  EXPECT_FALSE(plain.has_value());
  EXPECT_FALSE(boolean.has_value());
}

}  // namespace
}  // namespace dolsot
