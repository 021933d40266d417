// Tests for the settings handed to ty (typecheck/ty_settings.h): search
// directories, the `initialize` params, and the server key.
#include "typecheck/ty_settings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/typecheck/typecheck_test_support.h"
#include "typecheck/file_uri.h"

namespace dolsot::typecheck {
namespace {

using namespace typecheck_testing;
using nlohmann::json;

TEST(TypeGateSettings, SearchDirsAreAbsoluteNormalizedAndUsable) {
  ScratchDir dir;
  fs::create_directories(dir.path() + "/a");
  fs::create_directories(dir.path() + "/stdlib");
  std::ofstream(dir.path() + "/stdlib/typing.py") << "\n";
  fs::create_directories(dir.path() + "/lib-dynload");
  std::ofstream(dir.path() + "/lib.zip") << "";
  TypeCheckRequest request;
  request.python_path = {dir.path() + "/a/", dir.path() + "/missing", dir.path() + "/lib.zip",
                         dir.path() + "/stdlib", dir.path() + "/lib-dynload",
                         dir.path() + "/a/../a", "", dir.path()};
  std::vector<std::string> expected = {dir.path() + "/a", fs::current_path().string(),
                                       dir.path()};
  EXPECT_EQ(SearchDirs(request), expected);
}

TEST(TypeGateSettings, InitializeParamsCarryTheInterpreterAndSearchPaths) {
  ScratchDir dir;
  TypeCheckRequest request;
  request.python_path = {dir.path()};
  request.python_executable = "/opt/py/bin/python3";
  json params = InitializeParams("/tmp/ws", 1234, request);
  EXPECT_EQ(params["processId"], 1234);
  EXPECT_EQ(params["rootUri"], "file:///tmp/ws");
  EXPECT_EQ(params["workspaceFolders"][0]["uri"], "file:///tmp/ws");
  const json& options = params["initializationOptions"];
  EXPECT_EQ(options["configurationFile"], "/dev/null");
  const json& environment = options["configuration"]["environment"];
  EXPECT_EQ(environment["extra-paths"], json::array({dir.path()}));
  EXPECT_EQ(environment["python"], "/opt/py/bin/python3");
  EXPECT_EQ(params["capabilities"]["general"]["positionEncodings"][0], "utf-32");
  EXPECT_EQ(params["capabilities"]["textDocument"]["publishDiagnostics"]["relatedInformation"],
            true);
  request.python_executable.clear();
  EXPECT_FALSE(InitializeParams("/tmp/ws", 1, request)["initializationOptions"]["configuration"]
                   ["environment"]
                       .contains("python"));
}

// Paths reach ty exactly, whatever characters they hold (the old ty.toml
// could not hold a DEL and silently turned the gate off).
TEST(TypeGateSettings, OddPathsSurviveTheTripThroughJson) {
  ScratchDir root;
  std::string odd = root.path() + "/del\x7f quote\" back\\slash\nnew line \xc3\xbc";
  ASSERT_TRUE(fs::create_directories(odd));
  TypeCheckRequest request;
  request.python_path = {odd};
  request.python_executable = odd + "/python";
  json sent = json::parse(InitializeParams(odd, 1, request).dump());
  const json& environment = sent["initializationOptions"]["configuration"]["environment"];
  EXPECT_EQ(environment["extra-paths"][0], odd);
  EXPECT_EQ(environment["python"], odd + "/python");
  EXPECT_EQ(PathOfUri(sent["rootUri"].get<std::string>()), odd);
}

TEST(TypeGateSettings, TheServerKeyChangesWithAnySetting) {
  TypeCheckRequest request;
  request.python_path = {"/a", "/b"};
  request.python_executable = "/py";
  std::string key = ServerKey("/ty", request);
  EXPECT_EQ(ServerKey("/ty", request), key);
  EXPECT_NE(ServerKey("/ty2", request), key);
  TypeCheckRequest other = request;
  other.python_executable = "/py2";
  EXPECT_NE(ServerKey("/ty", other), key);
  other = request;
  other.python_path = {"/a"};
  EXPECT_NE(ServerKey("/ty", other), key);
  // No list of paths spells another: a newline inside a path is not a separator.
  other = request;
  other.python_path = {"/a\n/b"};
  EXPECT_NE(ServerKey("/ty", other), key);
  other.python_path = {"/a", "/b", ""};
  EXPECT_NE(ServerKey("/ty", other), key);
}

}  // namespace
}  // namespace dolsot::typecheck
