// InProcessSession in a C++ host that never started CPython: Create starts
// the interpreter, Close finalizes it, and a second session can start it
// again. (Its own binary: no embedded interpreter around it.)
#include <Python.h>
#include <gtest/gtest.h>

#include "backend_inprocess/in_process_session.h"

namespace dolsot {
namespace {

TEST(OwnedInterpreter, StartedByCreateAndFinalizedByClose) {
  for (int round = 0; round < 2; ++round) {
    ASSERT_FALSE(Py_IsInitialized());
    InProcessOptions options;
    options.toolboxes.emplace_back("m", "math");
    auto session = InProcessSession::Create(std::move(options));
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    EXPECT_TRUE(Py_IsInitialized());
    StatusOr<Result> r = (*session)->Run("s", "print('hi')\nm.factorial(5)", {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stdout_text, "hi\n");
    EXPECT_EQ(*r->value, "120");
    RunOptions quick;
    quick.timeout_seconds = 0.2;
    StatusOr<Result> late = (*session)->Run("s", "while True:\n    pass", quick);
    EXPECT_EQ(late->exit_code, kExitTimeout);
    EXPECT_TRUE((*session)->Close().ok());
    EXPECT_FALSE(Py_IsInitialized());
  }
}

}  // namespace
}  // namespace dolsot
