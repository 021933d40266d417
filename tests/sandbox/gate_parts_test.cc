// The gate's parts: identifier folding, source checks, format templates, the
// rule and name tables, the policy, and the CellGate wrapper.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>

#include "sandbox/ast_gate.h"
#include "sandbox/format_template.h"
#include "sandbox/identifier.h"
#include "sandbox/rules.h"
#include "sandbox/source_text.h"

namespace dolsot::sandbox {
namespace {

std::string Fold(std::string_view text) {
  std::string scratch;
  return std::string(NormalizeIdentifier(text, scratch));
}

TEST(NormalizeIdentifier, AsciiIsReturnedAsIs) { EXPECT_EQ(Fold("eval"), "eval"); }

TEST(NormalizeIdentifier, FoldsCompatibilityCharactersLikeCpython) {
  EXPECT_EQ(Fold("\xef\xbd\x85\xef\xbd\x96\xef\xbd\x81\xef\xbd\x8c"), "eval");  // fullwidth
  EXPECT_EQ(Fold("\xf0\x9d\x90\x9e\xf0\x9d\x90\xaf\xf0\x9d\x90\x9a\xf0\x9d\x90\xa5"),
            "eval");                                   // mathematical bold
  EXPECT_EQ(Fold("\xe2\x84\xafxec"), "exec");          // U+212F script small e
  EXPECT_EQ(Fold("\xef\xac\x81le"), "file");           // U+FB01 ligature fi
  EXPECT_EQ(Fold("\xc5\xbfys"), "sys");                // U+017F long s
  EXPECT_EQ(Fold("_\xef\xbc\xbf" "class__"), "__class__");  // U+FF3F fullwidth low line
  EXPECT_EQ(Fold("\xe2\x85\xb0" "d"), "id");              // U+2170 small roman numeral one
}

TEST(NormalizeIdentifier, KeepsCharactersWithoutAsciiForm) {
  EXPECT_EQ(Fold("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(Fold("\xce\xbb"), "\xce\xbb");
}

TEST(CheckSourceText, AcceptsOrdinaryUtf8) {
  EXPECT_FALSE(CheckSourceText("x = '\xed\x95\x9c'\r\n# \xf0\x9f\x8e\x89\n", DefaultPolicy()));
}

TEST(CheckSourceText, RejectsWhatCpythonReadsDifferently) {
  Policy policy = DefaultPolicy();
  EXPECT_EQ(CheckSourceText("a\rb", policy)->rule, Rule::kInvalidSource);
  EXPECT_EQ(CheckSourceText("a\r", policy)->rule, Rule::kInvalidSource);
  EXPECT_EQ(CheckSourceText(std::string_view("a\0", 2), policy)->rule, Rule::kInvalidSource);
  EXPECT_EQ(CheckSourceText("\xe2\x82", policy)->rule, Rule::kInvalidSource);   // truncated
  EXPECT_EQ(CheckSourceText("\xf4\x90\x80\x80", policy)->rule, Rule::kInvalidSource);  // > U+10FFFF
  EXPECT_EQ(CheckSourceText("# coding=latin-1\n", policy)->rule, Rule::kInvalidSource);
  EXPECT_FALSE(CheckSourceText("x = 1\n# coding: latin-1\n", policy));  // line 2 after code
}

TEST(CheckSourceText, LocatesTheProblemByLineAndCodePointColumn) {
  auto finding = CheckSourceText("x = 1\n\xc3\xa9\xc3\xa9\r", DefaultPolicy());
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->line, 2u);
  EXPECT_EQ(finding->column, 3u);
  EXPECT_EQ(finding->start_byte, 10u);
}

TEST(CheckSourceText, RejectsOversizedCells) {
  Policy policy = DefaultPolicy();
  policy.max_source_bytes = 4;
  EXPECT_EQ(CheckSourceText("x = 12", policy)->rule, Rule::kSourceLimit);
}

TEST(FormatTemplate, ListsAttributesOfEveryField) {
  using V = std::vector<std::string>;
  EXPECT_EQ(FormatFieldAttributes("{0.a.b} {x[k].c!r:>{y.d}} {{z.e}}"), (V{"a", "b", "c", "d"}));
  EXPECT_EQ(FormatFieldAttributes("{:.2f} {} {name}"), V{});
}

TEST(FormatTemplate, DecodesEscapesTheWayCpythonDoes) {
  std::string out;
  ASSERT_TRUE(DecodeLiteralBody("\\x5f\\137\\u005f\\U0000005f\\\\\\q", false, out));
  EXPECT_EQ(out, "____\\\\q");
  ASSERT_TRUE(DecodeLiteralBody("\\x5f", true, out));
  EXPECT_EQ(out, "\\x5f");
  EXPECT_FALSE(DecodeLiteralBody("\\N{LOW LINE}", false, out));
}

TEST(Rules, EveryRuleHasAUniqueId) {
  std::set<std::string_view> ids;
  for (const RuleInfo& info : AllRules()) {
    EXPECT_FALSE(info.summary.empty());
    EXPECT_TRUE(ids.insert(info.id).second) << info.id;
    EXPECT_EQ(RuleId(info.rule), info.id);
  }
}

TEST(Rules, NameTables) {
  EXPECT_TRUE(IsAlwaysDeniedName("eval"));
  EXPECT_FALSE(IsAlwaysDeniedName("print"));
  EXPECT_TRUE(IsBuiltinName("print"));
  EXPECT_TRUE(IsInternalAttribute("gi_frame"));
  EXPECT_TRUE(IsDeniedAttribute("sys"));
  EXPECT_TRUE(IsDunder("__init__"));
  EXPECT_FALSE(IsDunder("____"));
  EXPECT_FALSE(IsDunder("__x"));
}

TEST(PolicyTest, ModuleAllowListCoversSubmodulesAndToolboxes) {
  Policy policy = DefaultPolicy();
  EXPECT_TRUE(policy.IsModuleAllowed("json"));
  EXPECT_TRUE(policy.IsModuleAllowed("collections.abc"));
  EXPECT_FALSE(policy.IsModuleAllowed("os"));
  EXPECT_FALSE(policy.IsModuleAllowed("jsonx"));
  policy.AllowToolbox("tb", "pkg.tools");
  EXPECT_TRUE(policy.IsModuleAllowed("tb"));
  EXPECT_TRUE(policy.IsModuleAllowed("pkg.tools.sub"));
  EXPECT_FALSE(policy.IsModuleAllowed("pkg"));
}

TEST(CheckCellLimits, CapsTheNumberOfFindings) {
  Policy policy = DefaultPolicy();
  policy.max_findings = 3;
  std::vector<Finding> findings = CheckCell("eval\neval\neval\neval\neval\n", policy);
  ASSERT_EQ(findings.size(), 4u);
  EXPECT_EQ(findings.back().message, "2 more finding(s) not shown");
}

TEST(CheckCellLimits, DeepNestingIsRejectedNotOverflowed) {
  std::string deep = "x = " + std::string(200000, '(') + "1" + std::string(200000, ')') + "\n";
  std::vector<Finding> findings = CheckCell(deep, DefaultPolicy());
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0].rule, Rule::kSourceLimit);
}

TEST(CheckCellLimits, FindingsCarryLineColumnAndSpan) {
  std::string code = "x = 1\ny = '\xc3\xa9' + eval('2')\n";
  std::vector<Finding> findings = CheckCell(code, DefaultPolicy());
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].line, 2u);
  EXPECT_EQ(findings[0].column, 11u);
  EXPECT_EQ(code.substr(findings[0].start_byte, findings[0].end_byte - findings[0].start_byte),
            "eval");
  EXPECT_EQ(FormatFinding(findings[0]), "line 2, col 11: [name-denied] name `eval` is denied");
}

// The AST gate as the pipeline calls it: only the code matters to it.
GateVerdict Check(const CellGate& gate, std::string_view code) {
  static const std::vector<std::string> kNoNames;
  return gate(GateRequest{code, kNoNames, std::chrono::steady_clock::now()});
}

TEST(AstGate, AllowsAndRejectsWithOneFindingPerLine) {
  CellGate gate = MakeAstGate();
  EXPECT_TRUE(Check(gate, "x = [i * i for i in range(3)]\n").allowed);
  GateVerdict verdict = Check(gate, "import os\neval('1')\n");
  EXPECT_FALSE(verdict.allowed);
  EXPECT_EQ(verdict.message,
            "rejected by the gate:\n"
            "line 1, col 8: [import-denied] module `os` is not in the allow-list\n"
            "line 2, col 1: [name-denied] name `eval` is denied");
}

TEST(AstGate, UsesTheGivenPolicy) {
  Policy policy = DefaultPolicy();
  policy.AllowToolbox("tb", "tools");
  policy.denied_names.insert("secret");
  CellGate gate = MakeAstGate(policy);
  EXPECT_TRUE(Check(gate, "import tools\ntb.run()\n").allowed);
  EXPECT_FALSE(Check(gate, "secret()\n").allowed);
  EXPECT_FALSE(Check(gate, "tb.run = None\n").allowed);
}

}  // namespace
}  // namespace dolsot::sandbox
