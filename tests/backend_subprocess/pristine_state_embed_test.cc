// Tests for PristineState (backend_subprocess/pristine_state.h), inside one
// embedded CPython, on a namespace of its own and __builtins__' dict, as a
// runner uses them.
#include "backend_subprocess/pristine_state.h"

#include <gtest/gtest.h>
#include <pybind11/embed.h>

#include <optional>
#include <string>

#include "embedded/cell_sources.h"

namespace dolsot {
namespace {

namespace py = pybind11;

class PristineStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gil_.emplace();
    py::dict ns;
    ns["__name__"] = "__main__";
    ns["__doc__"] = py::none();
    ns["__annotations__"] = py::dict();
    ns["__builtins__"] = py::module_::import("builtins");
    ns_ = ns;
    builtins_ = py::module_::import("builtins").attr("__dict__");
  }
  void TearDown() override {
    ns_ = py::object();
    builtins_ = py::object();
    gil_.reset();
  }

  void Cell(const char* code) { py::exec(code, ns_.cast<py::dict>()); }
  // The namespace's (name, id) pairs in order, as a cell would list them.
  std::string Listing() {
    py::dict scope;
    scope["ns"] = ns_;
    return py::eval("repr([(k, id(v)) for k, v in ns.items()])", scope).cast<std::string>();
  }

  std::optional<py::gil_scoped_acquire> gil_;
  py::object ns_;  // a dict (made once the GIL is held)
  py::object builtins_;
};

TEST_F(PristineStateTest, PutsBackNamesBoundChangedAndReboundInTheirOrder) {
  PristineState pristine;
  pristine.Note(ns_.ptr(), builtins_.ptr(), 7);
  ASSERT_TRUE(pristine.held());
  EXPECT_EQ(pristine.cells_run(), 7u);
  const std::string before = Listing();
  Cell("x = [1, 2]\ny = 'text'\n__name__ = 'other'\n");
  // A pristine name deleted and bound again lands last: the order changed.
  Cell("d = __doc__\ndel __doc__\n__doc__ = 'a doc'\n");
  ASSERT_NE(Listing(), before);
  ASSERT_TRUE(pristine.Restore());
  EXPECT_EQ(Listing(), before);
  EXPECT_EQ(ns_["__name__"].cast<std::string>(), "__main__");
  EXPECT_TRUE(ns_["__doc__"].is_none());
  EXPECT_FALSE(ns_.contains("x"));
  // Nothing changed: still the same.
  ASSERT_TRUE(pristine.Restore());
  EXPECT_EQ(Listing(), before);
}

TEST_F(PristineStateTest, PutsBackTheCellSources) {
  PristineState pristine;
  RegisterCellSource("<cell 1>", "kept = 1\n");
  pristine.Note(ns_.ptr(), builtins_.ptr(), 1);
  ASSERT_TRUE(pristine.held());
  RegisterCellSource("<cell 2>", "gone = 2\n");
  RegisterCellSource("<cell 1>", "replaced = 1\n");
  ASSERT_TRUE(pristine.Restore());
  EXPECT_FALSE(RegisteredCellSource("<cell 2>").has_value());
  EXPECT_EQ(RegisteredCellSource("<cell 1>").value_or(""), "kept = 1\n");
}

TEST_F(PristineStateTest, RefusesWhenTheBuiltinsBindOtherObjects) {
  py::object len = builtins_["len"];
  for (const char* change : {"added", "rebound"}) {
    PristineState pristine;
    pristine.Note(ns_.ptr(), builtins_.ptr(), 0);
    ASSERT_TRUE(pristine.held());
    Cell("x = 1\n");
    if (std::string(change) == "added") {
      builtins_["a_host_tool"] = py::int_(3);  // the host's tools are bound as builtins
    } else {
      builtins_["len"] = py::int_(4);
    }
    EXPECT_FALSE(pristine.Restore()) << change;
    EXPECT_TRUE(ns_.contains("x")) << change;  // refused before anything changed
    if (std::string(change) == "added") {
      builtins_.attr("pop")("a_host_tool");
    } else {
      builtins_["len"] = len;
    }
    EXPECT_TRUE(pristine.Restore()) << change;  // as they were: the same objects
    EXPECT_FALSE(ns_.contains("x")) << change;
  }
}

TEST_F(PristineStateTest, RefusesWhenAModuleWasImportedOrAnEmptyContainerFilled) {
  {
    PristineState pristine;
    pristine.Note(ns_.ptr(), builtins_.ptr(), 0);
    ASSERT_TRUE(pristine.held());
    Cell("__annotations__['k'] = int\nx = 1\n");
    EXPECT_FALSE(pristine.Restore());
    EXPECT_TRUE(ns_.contains("x"));  // refused before anything changed
    Cell("__annotations__.clear()\n");
    EXPECT_TRUE(pristine.Restore());
    EXPECT_FALSE(ns_.contains("x"));
  }
  {
    PristineState pristine;
    pristine.Note(ns_.ptr(), builtins_.ptr(), 0);
    py::module_::import("sys").attr("modules")["dolsot_test_fake_module"] = py::int_(1);
    Cell("y = 2\n");
    EXPECT_FALSE(pristine.Restore());
    EXPECT_TRUE(ns_.contains("y"));
    py::module_::import("sys").attr("modules").attr("pop")("dolsot_test_fake_module");
  }
}

TEST_F(PristineStateTest, HoldsNothingOverAFullContainerOrOnceForgotten) {
  PristineState pristine;
  ns_["items"] = py::list(py::make_tuple(1, 2));  // what changes inside it cannot be told
  pristine.Note(ns_.ptr(), builtins_.ptr(), 0);
  EXPECT_FALSE(pristine.held());
  EXPECT_FALSE(pristine.Restore());
  ns_.attr("pop")("items");
  pristine.Note(ns_.ptr(), builtins_.ptr(), 0);
  ASSERT_TRUE(pristine.held());
  pristine.Forget();
  EXPECT_FALSE(pristine.held());
  Cell("z = 3\n");
  EXPECT_FALSE(pristine.Restore());
  EXPECT_TRUE(ns_.contains("z"));
}

}  // namespace
}  // namespace dolsot
