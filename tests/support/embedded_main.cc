// GoogleTest main for suites that need CPython: one interpreter per test
// process (started before any test, finalized after all), as pybind11's own
// embedding tests do. The build tree's python/ folder is put on sys.path so
// the dolsot package is importable; the GIL is released while tests run, so
// each test acquires it where it touches Python.
#include <gtest/gtest.h>
#include <pybind11/embed.h>

namespace py = pybind11;

#if defined(__SANITIZE_ADDRESS__)
// CPython keeps allocations alive until exit by design; LeakSanitizer would
// report them (run sanitized suites with PYTHONMALLOC=malloc).
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  py::scoped_interpreter interpreter;
  py::module_::import("sys").attr("path").attr("insert")(0, DOLSOT_BUILD_PYTHON_DIR);
  // The interpreter the build found (a venv's python) has its packages (dill)
  // in this site directory; an embedded interpreter does not see it by itself.
  py::module_::import("site").attr("addsitedir")(DOLSOT_PYTHON_SITE_PACKAGES);
  int rc = 0;
  {
    py::gil_scoped_release release;
    rc = RUN_ALL_TESTS();
  }
  return rc;
}
