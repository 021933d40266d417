// The proofs' quick looks (embedded/cell_prescan.h): what each lets through
// to the parse and what it turns away, including the lines of a def's body,
// which MayBind skips because defining a function runs none of them.
#include "embedded/cell_prescan.h"

#include <gtest/gtest.h>

#include <string_view>

namespace dolsot {
namespace {

TEST(CellPrescan, MayBindLetsBindingShapesThrough) {
  for (std::string_view code :
       {"x = 1", "x += 1", "items.append(x)", "for i in range(3):\n    t += i",
        "if n:\n    y = 1\nelse:\n    y = 2", "while k < 3:\n    k += 1",
        "def f(x):\n    return x * 2", "words = s.split()\nn = len(words)",
        "top = sorted(d.items(), key=lambda kv: -kv[1])",
        // A def's body is skipped: what it imports or reaches runs later.
        "def f():\n    import os\n    return os.getpid()\nx = 1",
        "def g(a,\n      b):\n    return a.attr\ny = g"}) {
    EXPECT_TRUE(MayBind(code)) << code;
  }
}

TEST(CellPrescan, MayBindTurnsAwayWhatTheProofRefuses) {
  for (std::string_view code :
       {"import math", "from os import path", "class C:\n    pass", "del x", "x.attr = 1",
        "y = obj.method()", "with f:\n    pass", "try:\n    x = 1\nexcept E:\n    pass",
        "@decorator\ndef f():\n    pass", "(y := 1)", "global x", "raise ValueError",
        "async def f():\n    pass", "y = s.format(1)", "y = b.decode()",
        // After a def, a line back at the margin is the cell's own again.
        "def f():\n    return 1\nimport os",
        "def f(x=obj.attr):\n    pass"}) {
    EXPECT_FALSE(MayBind(code)) << code;
  }
}

TEST(CellPrescan, EveryBindingMethodIsOneAndFormatIsNot) {
  for (const char* method : BindingMethods()) EXPECT_TRUE(IsBindingMethod(method)) << method;
  for (std::string_view word : {"format", "format_map", "encode", "decode", "__class__", "mro"}) {
    EXPECT_FALSE(IsBindingMethod(word)) << word;
  }
}

TEST(CellPrescan, MayBeReadOnlyIsStricter) {
  EXPECT_TRUE(MayBeReadOnly("len(t) + 1"));
  for (std::string_view code : {"x = 1", "items.append(1)", "for i in t: pass", "def f(): pass",
                                "lambda: 0"}) {
    EXPECT_FALSE(MayBeReadOnly(code)) << code;
    EXPECT_TRUE(MayBind(code)) << code;
  }
}

}  // namespace
}  // namespace dolsot
