// RunCell across interpreter lifetimes. The cell runtime (routers, cached
// names) is found through a per-thread cache; finalizing an interpreter must
// make that cache stale, or the next interpreter (often at the same address)
// would be handed the freed runtime of the last one.
#include <Python.h>

#include <gtest/gtest.h>

#include <string>

#include "embedded/cell_runner.h"

namespace dolsot {
namespace {

TEST(CellRunnerAcrossInterpreters, EachInterpreterGetsARuntimeOfItsOwn) {
  for (int round = 0; round < 3; ++round) {
    Py_InitializeEx(0);
    ASSERT_TRUE(Py_IsInitialized());
    PyObject* globals = PyDict_New();
    ASSERT_NE(globals, nullptr);
    std::string code = "import sys\nprint('round', " + std::to_string(round) + ")\n" +
                       "sys.stderr.write('e\\n')\n6 * 7";
    CellRequest request;
    request.code = code;
    request.filename = "<cell 1>";
    Result result = RunCell(globals, request);
    EXPECT_TRUE(result.ok) << result.error.value_or("");
    EXPECT_EQ(result.value, "42");
    // Captured, so the routers of this interpreter are installed and used.
    EXPECT_EQ(result.stdout_text, "round " + std::to_string(round) + "\ne\n");
    Result failing = RunCell(globals, CellRequest{"1 / 0", "<cell 2>"});
    EXPECT_FALSE(failing.ok);
    EXPECT_NE(failing.error.value_or("").find("ZeroDivisionError"), std::string::npos);
    Py_DECREF(globals);
    ASSERT_EQ(Py_FinalizeEx(), 0);
  }
}

}  // namespace
}  // namespace dolsot
