// Tests for the text ty checks (typecheck/cell_source.h).
#include "typecheck/cell_source.h"

#include <gtest/gtest.h>

#include <string>

namespace dolsot::typecheck {
namespace {

TEST(TypeGateCellSource, ThePreludeBindsAliasesAndTypesSessionNamesAsAny) {
  TypeCheckRequest request;
  request.code = "mt.add(df, 1)";
  request.toolboxes = {{"mt", "mytools"}, {"pk", "pkg.sub"}};
  request.session_names = {"df", "mt", "_dolsot_Any_"};
  CellSource source = BuildCellSource(request);
  EXPECT_EQ(source.text,
            "import mytools as mt\n"
            "import pkg.sub as pk\n"
            "from typing import Any as _dolsot_Any_\n"
            "df: _dolsot_Any_ = ...\n"
            "mt.add(df, 1)\n");
  EXPECT_EQ(source.prelude_lines, 4);
}

// Nothing a caller passes as a name can add code to the prelude.
TEST(TypeGateCellSource, NamesThatAreNotIdentifiersAreLeftOut) {
  TypeCheckRequest request;
  request.code = "x\n";
  request.toolboxes = {{"ok", "os\nimport evil"}, {"a b", "m"}, {"class", "m"}, {"t", "a..b"},
                       {"u", ".a"}, {"v", "1a"}, {"\xc3\xa9", "m\xc3\xa9"}};
  request.session_names = {"1x", "x;y", "def", "", "\xc3\xbc"};
  CellSource source = BuildCellSource(request);
  EXPECT_EQ(source.text,
            "import m\xc3\xa9 as \xc3\xa9\n"
            "from typing import Any as _dolsot_Any_\n"
            "\xc3\xbc: _dolsot_Any_ = ...\n"
            "x\n");
  EXPECT_EQ(source.prelude_lines, 3);
}

TEST(TypeGateCellSource, TheTextEndsWithOneNewline) {
  TypeCheckRequest request;
  EXPECT_EQ(BuildCellSource(request).text, "from typing import Any as _dolsot_Any_\n");
  request.code = "x = 1";
  EXPECT_EQ(BuildCellSource(request).text, "from typing import Any as _dolsot_Any_\nx = 1\n");
  request.code = "x = 1\n";
  EXPECT_EQ(BuildCellSource(request).text, "from typing import Any as _dolsot_Any_\nx = 1\n");
}

}  // namespace
}  // namespace dolsot::typecheck
