// One rule for toolbox aliases and module names, whatever door they come in by.
#include "core/toolbox_name.h"

#include <gtest/gtest.h>

namespace dolsot {
namespace {

TEST(ToolboxName, AliasesAreAsciiIdentifiersNotKeywordsNotDunders) {
  for (const char* good : {"mt", "_private", "T2", "tools_v2"}) {
    EXPECT_TRUE(ValidateToolboxAlias(good).ok()) << good;
  }
  for (const char* bad : {"", "2x", "a-b", "a.b", "__x", "__", "if", "None", "class",
                          "caf\xC3\xA9", "\xEF\xBD\x85val" /* fullwidth e */, "a b"}) {
    Status status = ValidateToolboxAlias(bad);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidToolbox) << bad;
  }
  EXPECT_NE(ValidateToolboxAlias("if").message().find("'if'"), std::string::npos);
}

TEST(ToolboxName, AnAliasNeverHidesABuiltin) {
  for (const char* builtin : {"print", "len", "open", "input", "ValueError", "sorted"}) {
    Status status = ValidateToolboxAlias(builtin);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidToolbox) << builtin;
    EXPECT_NE(status.message().find("builtin"), std::string::npos) << status.message();
  }
  EXPECT_TRUE(ValidateToolboxAlias("printer").ok());
}

TEST(ToolboxName, ModulesAreDottedIdentifiers) {
  for (const char* good : {"mytools", "pkg.sub", "a._b.c2"}) {
    EXPECT_TRUE(ValidateToolboxModule("mt", good).ok()) << good;
  }
  for (const char* bad : {"", ".", "pkg.", ".pkg", "pkg..sub", "my-tools", "pkg.class",
                          "os; import sys", "../etc"}) {
    Status status = ValidateToolboxModule("mt", bad);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidToolbox) << bad;
    EXPECT_NE(status.message().find("'mt'"), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace dolsot
