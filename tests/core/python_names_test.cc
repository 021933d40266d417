// Python's keywords and builtin names, as every part of dolsot reads them.
#include "core/python_names.h"

#include <gtest/gtest.h>

namespace dolsot {
namespace {

TEST(PythonNames, Keywords) {
  for (const char* keyword : {"if", "None", "True", "nonlocal", "async", "await", "yield"}) {
    EXPECT_TRUE(IsPythonKeyword(keyword)) << keyword;
  }
  // Soft keywords are names: a toolbox may be called `match` or `type`.
  for (const char* name : {"match", "case", "type", "_", "print", "If", ""}) {
    EXPECT_FALSE(IsPythonKeyword(name)) << name;
  }
}

TEST(PythonNames, Builtins) {
  for (const char* builtin : {"print", "len", "open", "ExceptionGroup", "aiter", "anext",
                              "PythonFinalizationError", "EncodingWarning"}) {
    EXPECT_TRUE(IsPythonBuiltinName(builtin)) << builtin;
  }
  for (const char* name : {"__import__", "os", "mytools", "Print", ""}) {
    EXPECT_FALSE(IsPythonBuiltinName(name)) << name;
  }
}

}  // namespace
}  // namespace dolsot
