// Tests for the choice of ty's diagnostics that reject a cell
// (typecheck/diagnostic_filter.h), on pull-diagnostics items as ty sends them.
#include "typecheck/diagnostic_filter.h"

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "typecheck/file_uri.h"

namespace dolsot::typecheck {
namespace {

using nlohmann::json;

// The checked file; its directory is named like the toolbox on purpose.
constexpr const char* kCellPath = "/tmp/mytools/dolsot-ty-1/cell.py";

// One item as ty reports it: `line` and `character` 0-based in the file.
json Item(const char* rule, const std::string& message, int line, int character,
          const char* related_path = nullptr) {
  json item = {{"code", rule},
               {"message", message},
               {"range",
                {{"start", {{"line", line}, {"character", character}}},
                 {"end", {{"line", line}, {"character", character + 3}}}}},
               {"relatedInformation", json::array()}};
  if (related_path != nullptr) {
    item["relatedInformation"].push_back(
        {{"location", {{"uri", FileUri(related_path)}, {"range", item["range"]}}},
         {"message", "Function defined here"}});
  }
  return item;
}

class TypeGateFilter : public ::testing::Test {
 protected:
  void SetUp() override {
    request_.code =
        "mt.add(1, \"x\")\n"  // 1
        "own(1, 2)\n"         // 2
        "undefined\n"         // 3
        "mt.add(1, a=2)\n"    // 4
        "mt.nosuch()\n"       // 5
        "os.nosuch()\n"       // 6
        "mt.pick(1.5)\n"      // 7
        "xmt.add(1, a=2)\n";  // 8
    request_.toolboxes = {{"mt", "mytools"}};
    source_.prelude_lines = 2;  // cell line N is file line N + 2, 0-based N + 1
  }
  std::vector<TypeDiagnostic> Filter(const json& items) {
    return ToolboxDiagnostics(items, request_, source_, kCellPath);
  }
  TypeCheckRequest request_;
  CellSource source_;
};

constexpr const char* kAlreadyAssigned =
    "Multiple values provided for parameter `a` of function `add`";

TEST_F(TypeGateFilter, KeepsOnlyToolboxCallDiagnosticsMappedToTheCell) {
  const char* toolbox = "/somewhere/site-packages/mytools/__init__.py";
  json items = json::array({
      Item("invalid-argument-type",
           "Argument to function `add` is incorrect: Expected `int`, found `Literal[\"x\"]`", 2, 10,
           toolbox),
      // The cell's own function, although the cell's path names the toolbox.
      Item("too-many-positional-arguments", "Too many positional arguments to function `own`", 3,
           7, kCellPath),
      Item("unresolved-reference", "Name `undefined` used when not defined", 4, 0),
      // No related location: the line calls mt.add.
      Item("parameter-already-assigned", kAlreadyAssigned, 5, 10),
      Item("missing-attribute", "Module `mytools` has no member `nosuch`", 6, 0),
      Item("missing-attribute", "Module `os` has no member `nosuch`", 7, 0),
      Item("no-matching-overload",
           "No overload of function `pick` matches arguments\n\ninfo: Possible overloads", 8, 0,
           "/somewhere/mytools.pyi"),
      // No related location, and the line calls xmt.add, not mt.add.
      Item("parameter-already-assigned", kAlreadyAssigned, 9, 11),
      // In the prelude.
      Item("invalid-argument-type", "Argument to function `add` is incorrect", 0, 0, toolbox),
  });
  std::vector<TypeDiagnostic> kept = Filter(items);
  ASSERT_EQ(kept.size(), 4u);
  EXPECT_EQ(kept[0].rule, "invalid-argument-type");
  EXPECT_EQ(kept[0].line, 1);
  EXPECT_EQ(kept[0].column, 11);
  EXPECT_EQ(kept[0].message,
            "Argument to function `add` is incorrect: Expected `int`, found `Literal[\"x\"]`");
  EXPECT_EQ(kept[1].rule, "parameter-already-assigned");
  EXPECT_EQ(kept[1].line, 4);
  EXPECT_EQ(kept[2].rule, "missing-attribute");
  EXPECT_EQ(kept[2].line, 5);
  EXPECT_EQ(kept[3].rule, "no-matching-overload");
  EXPECT_EQ(kept[3].line, 7);
  EXPECT_EQ(kept[3].message, "No overload of function `pick` matches arguments");
}

// A report of an unexpected shape never crashes the host nor rejects a cell.
TEST_F(TypeGateFilter, ItemsOfAnUnexpectedShapeAreSkipped) {
  json good = Item("missing-attribute", "Module `mytools` has no member `nosuch`", 6, 0);
  json no_range = good;
  no_range.erase("range");
  json string_line = good;
  string_line["range"]["start"]["line"] = "6";
  json negative = good;
  negative["range"]["start"]["character"] = -1;
  json huge = good;
  huge["range"]["start"]["line"] = 1e300;
  json numeric_code = good;
  numeric_code["code"] = 3;
  json odd_related = good;
  odd_related["code"] = "invalid-argument-type";
  odd_related["relatedInformation"] = json::array({1, {{"location", "x"}}});
  json items = json::array({nullptr, 1, "x", json::array(), no_range, string_line, negative, huge,
                            numeric_code, odd_related, good});
  std::vector<TypeDiagnostic> kept = Filter(items);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].line, 5);
  EXPECT_TRUE(Filter(json::object()).empty());
  EXPECT_TRUE(Filter(json()).empty());
}

}  // namespace
}  // namespace dolsot::typecheck
