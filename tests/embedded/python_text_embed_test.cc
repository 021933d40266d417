// Utf8View: a str's UTF-8, and each policy for a lone surrogate.
#include "embedded/python_text.h"

#include <gtest/gtest.h>
#include <pybind11/embed.h>

namespace py = pybind11;

namespace dolsot {
namespace {

TEST(Utf8View, AValidStrIsAViewOfItsOwnUtf8) {
  py::gil_scoped_acquire gil;
  py::str text("caf\xC3\xA9 \xF0\x9F\x8D\x9A");
  std::string storage;
  auto view = Utf8View(text.ptr(), LoneSurrogates::kRefuse, storage);
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(*view, "caf\xC3\xA9 \xF0\x9F\x8D\x9A");
  EXPECT_TRUE(storage.empty()) << "no copy in the common case";
}

TEST(Utf8View, ALoneSurrogateFollowsThePolicy) {
  py::gil_scoped_acquire gil;
  py::object text = py::eval("'a\\udcff'");
  std::string storage;
  EXPECT_FALSE(Utf8View(text.ptr(), LoneSurrogates::kRefuse, storage).has_value());
  EXPECT_FALSE(PyErr_Occurred()) << "refusing leaves no error behind";
  auto passed = Utf8View(text.ptr(), LoneSurrogates::kPass, storage);
  ASSERT_TRUE(passed.has_value());
  EXPECT_EQ(*passed, "a\xED\xB3\xBF") << "the surrogate as its (invalid) UTF-8 bytes";
  auto escaped = Utf8View(text.ptr(), LoneSurrogates::kBackslashEscape, storage);
  ASSERT_TRUE(escaped.has_value());
  EXPECT_EQ(*escaped, "a\\udcff");
  EXPECT_FALSE(PyErr_Occurred());
}

}  // namespace
}  // namespace dolsot
