// ValidateCellInputs and NamesInScope: the names a cell's tools, final-answer
// function and variables may take.
#include "core/cell_inputs.h"

#include <gtest/gtest.h>

namespace dolsot {
namespace {

CellTools Tools(std::vector<std::string> names, std::string final_name = "") {
  CellTools tools;
  tools.names = std::move(names);
  tools.final_name = std::move(final_name);
  return tools;
}

CellVariable Variable(std::string name) {
  CellVariable v;
  v.name = std::move(name);
  return v;
}

TEST(CellInputs, OrdinaryNamesAreAccepted) {
  EXPECT_TRUE(ValidateCellInputs(Tools({"search", "llm_query"}, "SUBMIT"),
                                 {Variable("context"), Variable("_x1")})
                  .ok());
  EXPECT_TRUE(ValidateCellInputs(CellTools{}, {}).ok());
}

TEST(CellInputs, EachBadNameIsRefusedNamingIt) {
  struct Case {
    CellTools tools;
    std::vector<CellVariable> variables;
    const char* says;
  };
  const Case cases[] = {
      {Tools({"print"}), {}, "builtin"},
      {Tools({"class"}), {}, "keyword"},
      {Tools({"__import__"}), {}, "'__'"},
      {Tools({"9lives"}), {}, "identifier"},
      {Tools({"caf\xc3\xa9"}), {}, "ASCII"},
      {Tools({""}), {}, "identifier"},
      {Tools({"a", "a"}), {}, "twice"},
      {Tools({"a"}, "a"), {}, "both"},
      {Tools({}, "None"), {}, "keyword"},
      {Tools({}), {Variable("len")}, "builtin"},
      {Tools({}), {Variable("x"), Variable("x")}, "twice"},
  };
  for (const Case& c : cases) {
    Status s = ValidateCellInputs(c.tools, c.variables);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << c.says;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
  }
}

TEST(CellInputs, NamesInScopeAddsVariablesToolsAndTheFinalFunction) {
  auto names = NamesInScope({"a"}, Tools({"t"}, "SUBMIT"), {Variable("v")});
  EXPECT_EQ(names, (std::vector<std::string>{"a", "v", "t", "SUBMIT"}));
}

}  // namespace
}  // namespace dolsot
