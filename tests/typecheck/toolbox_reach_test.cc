// Tests for the decision that a cell cannot reach a toolbox
// (typecheck/toolbox_reach.h).
#include "typecheck/toolbox_reach.h"

#include <gtest/gtest.h>

#include <string>

namespace dolsot::typecheck {
namespace {

struct ReachCase {
  const char* name;
  const char* code;
  const char* alias;
  const char* module;
};

TypeCheckRequest RequestFor(const ReachCase& c) {
  TypeCheckRequest request;
  request.code = c.code;
  request.toolboxes = {{c.alias, c.module}};
  return request;
}

class TypeGateCannotReach : public ::testing::TestWithParam<ReachCase> {};

TEST_P(TypeGateCannotReach, IsNotChecked) {
  EXPECT_TRUE(CannotReachAToolbox(RequestFor(GetParam())));
}

INSTANTIATE_TEST_SUITE_P(
    Cells, TypeGateCannotReach,
    ::testing::Values(ReachCase{"Arithmetic", "1+1", "mt", "mytools"},
                      ReachCase{"Comprehension", "x = [n * 2 for n in range(3)]\nprint(x)", "mt",
                                "mytools"},
                      ReachCase{"LongerNames", "mtx = 1\nmt_2\nxmt\n_mt", "mt", "mytools"},
                      ReachCase{"BuiltinMisuse", "len(5)\n'a'.join(1)", "mt", "mytools"}),
    [](const auto& info) { return std::string(info.param.name); });

class TypeGateMayReach : public ::testing::TestWithParam<ReachCase> {};

// Any way a cell might reach a toolbox is checked by ty.
TEST_P(TypeGateMayReach, IsChecked) {
  EXPECT_FALSE(CannotReachAToolbox(RequestFor(GetParam())));
}

INSTANTIATE_TEST_SUITE_P(
    Cells, TypeGateMayReach,
    ::testing::Values(ReachCase{"Alias", "mt.add(1, 2)", "mt", "mytools"},
                      ReachCase{"AliasAfterANewline", "x = 1\n(mt)", "mt", "mytools"},
                      ReachCase{"AliasAfterADot", "obj.mt", "mt", "mytools"},
                      ReachCase{"AliasInAString", "s = 'mt'", "mt", "mytools"},
                      ReachCase{"Import", "import mytools\nmytools.add(1, 'x')", "mt", "mytools"},
                      ReachCase{"FromImport", "from mytools import add", "mt", "mytools"},
                      ReachCase{"DunderImport", "__import__('mytools')", "mt", "mytools"},
                      ReachCase{"Importlib", "importlib", "mt", "mytools"},
                      // NFKC folds the fullwidth letters into the alias `mt`.
                      ReachCase{"NonAscii", "\xef\xbd\x8d\xef\xbd\x94.add(1, 'x')", "mt",
                                "mytools"},
                      ReachCase{"NonAsciiString", "s = '\xc3\xa9'", "mt", "mytools"},
                      // Builtins' stubs live in stdlib modules: ty must decide.
                      ReachCase{"StdlibNamedModule", "len(5)", "b", "builtins"},
                      ReachCase{"StdlibNamedPackage", "x = 1", "p", "os.path"},
                      ReachCase{"TypeshedDirNamedModule", "x = 1", "s", "stdlib"},
                      ReachCase{"TypeshedStubPackage", "x = 1", "t", "typing_extensions.sub"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace dolsot::typecheck
