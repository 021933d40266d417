// GoogleTest main for suites that need CPython: one interpreter per test
// process (started before any test, finalized after all), as pybind11's own
// embedding tests do. The build tree's python/ folder is put on sys.path so
// the dolsot package is importable; the GIL is released while tests run, so
// each test acquires it where it touches Python.
#include <gtest/gtest.h>
#include <pybind11/embed.h>

namespace py = pybind11;

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  py::scoped_interpreter interpreter;
  py::module_::import("sys").attr("path").attr("insert")(0, DOLSOT_BUILD_PYTHON_DIR);
  int rc = 0;
  {
    py::gil_scoped_release release;
    rc = RUN_ALL_TESTS();
  }
  return rc;
}
