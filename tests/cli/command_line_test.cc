// Argument parsing: which command runs, with which arguments, and usage errors.
#include "cli/command_line.h"

#include <gtest/gtest.h>

#include <sstream>

#include "core/exit_codes.h"

namespace dolsot::cli {
namespace {

struct Parsed {
  CommandLine line;
  std::string out;
  std::string err;
};

Parsed Parse(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  Parsed parsed{ParseCommandLine(args, out, err), "", ""};
  parsed.out = out.str();
  parsed.err = err.str();
  return parsed;
}

TEST(CommandLineTest, CodeAndSession) {
  Parsed p = Parse({"--session", "work", "x + 1"});
  EXPECT_EQ(p.line.action, Action::kRun);
  EXPECT_EQ(p.line.run.session, "work");
  EXPECT_EQ(p.line.run.code_words, std::vector<std::string>{"x + 1"});
  EXPECT_FALSE(p.line.json);
  EXPECT_FALSE(p.line.run.timeout_seconds.has_value());
}

TEST(CommandLineTest, NamesTakesASessionAndStandsAlone) {
  Parsed p = Parse({"--names", "work", "--json"});
  EXPECT_EQ(p.line.action, Action::kNames);
  EXPECT_EQ(p.line.names.session, "work");
  EXPECT_TRUE(p.line.json);
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--names", "a", "--reset", "a"},
                                             {"--names", "a", "--list-sessions"},
                                             {"--names", "a", "--session", "a", "1"},
                                             {"--names", "a", "--json-lines"},
                                             {"mcp", "--names", "a"}}) {
    Parsed bad = Parse(args);
    EXPECT_EQ(bad.line.exit_code, kExitUsage) << args[2];
    EXPECT_EQ(bad.line.action, Action::kExit) << args[2];
  }
}

TEST(CommandLineTest, JsonLinesIsARunOption) {
  Parsed p = Parse({"--session", "w", "--json-lines", "1"});
  EXPECT_EQ(p.line.action, Action::kRun);
  EXPECT_TRUE(p.line.run.json_lines);
  EXPECT_FALSE(p.line.json);  // main.cc: --json-lines prints the --json document last
  Parsed listing = Parse({"--list-sessions", "--json-lines"});
  EXPECT_EQ(listing.line.exit_code, kExitUsage);
  EXPECT_NE(listing.err.find("--list-sessions cannot be combined with --json-lines"),
            std::string::npos) << listing.err;
}

TEST(CommandLineTest, CodeIsOptionalForStdin) {
  Parsed p = Parse({"--session=work"});
  EXPECT_EQ(p.line.action, Action::kRun);
  EXPECT_TRUE(p.line.run.code_words.empty());
}

TEST(CommandLineTest, RepeatedToolboxesKeepTheirOrder) {
  Parsed p = Parse({"--toolbox", "mytools:mt", "--toolbox", "otherlib:ol", "--session", "s", "1"});
  EXPECT_EQ(p.line.run.toolbox_specs, (std::vector<std::string>{"mytools:mt", "otherlib:ol"}));
  EXPECT_EQ(p.line.run.code_words, std::vector<std::string>{"1"});
}

TEST(CommandLineTest, TimeoutJsonAndGate) {
  Parsed p = Parse({"--session", "s", "--timeout", "2.5", "--json", "--gate", "1"});
  EXPECT_EQ(p.line.run.timeout_seconds, 2.5);
  EXPECT_TRUE(p.line.json);
  EXPECT_TRUE(p.line.run.gate);
}

TEST(CommandLineTest, NonNumericTimeoutIsAUsageError) {
  Parsed p = Parse({"--session", "s", "--timeout", "soon", "1"});
  EXPECT_EQ(p.line.action, Action::kExit);
  EXPECT_EQ(p.line.exit_code, kExitUsage);
  EXPECT_EQ(p.err.rfind("dolsot: error: ", 0), 0u) << p.err;
}

TEST(CommandLineTest, AnEmptyOptionValueIsAUsageErrorNotTheNextWord) {
  // CLI11 would take "1 + 1" as the session; the code would then come from
  // stdin, and a call with an open pipe would hang.
  for (const char* option : {"--session=", "--timeout=", "--toolbox=", "--reset="}) {
    Parsed p = Parse({option, "1 + 1"});
    EXPECT_EQ(p.line.action, Action::kExit) << option;
    EXPECT_EQ(p.line.exit_code, kExitUsage) << option;
    EXPECT_NE(p.err.find("has an empty value"), std::string::npos) << p.err;
  }
  Parsed after_dashes = Parse({"--session", "s", "--", "--x="});
  EXPECT_EQ(after_dashes.line.action, Action::kRun) << "code after -- is not an option";
}

TEST(CommandLineTest, CodeAfterDoubleDashMayStartWithADash) {
  Parsed p = Parse({"--session", "s", "--", "-1"});
  EXPECT_EQ(p.line.run.code_words, std::vector<std::string>{"-1"});
}

TEST(CommandLineTest, ListSessionsNeedsNoSession) {
  Parsed p = Parse({"--list-sessions", "--json"});
  EXPECT_EQ(p.line.action, Action::kListSessions);
  EXPECT_TRUE(p.line.json);
}

TEST(CommandLineTest, ResetTakesAnIdOrAll) {
  Parsed p = Parse({"--reset", "all"});
  EXPECT_EQ(p.line.action, Action::kReset);
  EXPECT_EQ(p.line.reset.target, "all");
}

TEST(CommandLineTest, ResetWithCodeIsAUsageError) {
  Parsed p = Parse({"--reset", "work", "--session", "work", "1"});
  EXPECT_EQ(p.line.action, Action::kExit);
  EXPECT_EQ(p.line.exit_code, kExitUsage);
}

TEST(CommandLineTest, ListSessionsWithResetIsAUsageError) {
  Parsed p = Parse({"--list-sessions", "--reset", "all"});
  EXPECT_EQ(p.line.exit_code, kExitUsage);
  EXPECT_NE(p.err.find("--list-sessions and --reset cannot be combined"), std::string::npos);
}

TEST(CommandLineTest, ListSessionsWithRunOptionsNamesTheOption) {
  Parsed p = Parse({"--list-sessions", "--timeout", "3"});
  EXPECT_EQ(p.line.action, Action::kExit);
  EXPECT_EQ(p.line.exit_code, kExitUsage);
  EXPECT_NE(p.err.find("--list-sessions cannot be combined with --timeout"), std::string::npos)
      << p.err;
  Parsed with_code = Parse({"--reset", "all", "x = 1"});
  EXPECT_NE(with_code.err.find("--reset cannot be combined with code to run"), std::string::npos)
      << with_code.err;
}

TEST(CommandLineTest, HelpStaysReadable) {
  Parsed p = Parse({"--help"});
  EXPECT_EQ(p.out.find("Excludes"), std::string::npos);
}

TEST(CommandLineTest, UnknownFlagIsAUsageErrorNamingIt) {
  Parsed p = Parse({"--session", "s", "--cache-dir", "/tmp/x", "1"});
  EXPECT_EQ(p.line.action, Action::kExit);
  EXPECT_EQ(p.line.exit_code, kExitUsage);
  EXPECT_NE(p.err.find("--cache-dir"), std::string::npos) << p.err;
  EXPECT_EQ(p.err.rfind("dolsot: error: ", 0), 0u) << p.err;
}

TEST(CommandLineTest, AMistypedLongOptionSuggestsTheNearestOne) {
  struct Case {
    std::vector<std::string> args;
    const char* suggestion;
  };
  for (const Case& c : {Case{{"--timout", "5", "1"}, "--timeout"},
                        Case{{"--sesion", "s", "1"}, "--session"},
                        Case{{"--session", "s", "--sandbx", "1"}, "--sandbox"},
                        Case{{"--jsno", "1"}, "--json"},
                        Case{{"mcp", "--toolbx", "x"}, "--toolbox"}}) {
    Parsed p = Parse(c.args);
    EXPECT_EQ(p.line.exit_code, kExitUsage) << c.args[0];
    EXPECT_NE(p.err.find(std::string("did you mean ") + c.suggestion + "?"), std::string::npos)
        << p.err;
  }
  // Nothing near enough: no guess.
  Parsed far = Parse({"--cache-dir", "/tmp/x", "1"});
  EXPECT_EQ(far.line.exit_code, kExitUsage);
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
}

TEST(CommandLineTest, SeveralCodeWordsAreKeptInOrder) {
  Parsed p = Parse({"-s", "s", "print(1,", "2)"});
  EXPECT_EQ(p.line.run.code_words, (std::vector<std::string>{"print(1,", "2)"}));
}

TEST(CommandLineTest, ShortFlagsMatchDolsot04) {
  Parsed p = Parse({"-s", "work", "-t", "3", "1"});
  EXPECT_EQ(p.line.run.session, "work");
  EXPECT_EQ(p.line.run.timeout_seconds, 3);
}

TEST(CommandLineTest, HelpPrintsExamplesToStdout) {
  Parsed p = Parse({"--help"});
  EXPECT_EQ(p.line.action, Action::kExit);
  EXPECT_EQ(p.line.exit_code, kExitOk);
  EXPECT_NE(p.out.find("--toolbox mytools:mt --session work"), std::string::npos);
  EXPECT_NE(p.out.find("Exit codes"), std::string::npos);
  EXPECT_EQ(p.err, "");
}

TEST(CommandLineTest, HelpNamesEveryMountMode) {
  Parsed p = Parse({"--help"});
  for (const char* mode : {"read-only", "read-write", "overlay"}) {
    EXPECT_NE(p.out.find(mode), std::string::npos) << mode;
  }
}

TEST(CommandLineTest, VersionPrintsTheVersion) {
  Parsed p = Parse({"--version"});
  EXPECT_EQ(p.line.exit_code, kExitOk);
  EXPECT_EQ(p.out, VersionLine() + "\n");
  EXPECT_EQ(p.out.rfind("dolsot ", 0), 0u);
}

TEST(CommandLineTest, McpTakesTheBackendFlags) {
  Parsed p = Parse({"mcp", "--toolbox", "mytools:mt", "--timeout", "60", "--gate", "--max-text", "900"});
  EXPECT_EQ(p.line.action, Action::kMcp) << p.err;
  EXPECT_EQ(p.line.mcp.backend.toolbox_specs, std::vector<std::string>{"mytools:mt"});
  EXPECT_EQ(p.line.mcp.backend.timeout_seconds, 60.0);
  EXPECT_TRUE(p.line.mcp.backend.gate);
  EXPECT_EQ(p.line.mcp.backend.max_text, 900);
  EXPECT_TRUE(p.line.run.toolbox_specs.empty()) << "the run command's flags are untouched";
}

TEST(CommandLineTest, McpDoesNotCombineWithTheRunCommandsWork) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--session", "s", "mcp"}, {"--json", "mcp"}, {"--list-sessions", "mcp"},
           {"--reset", "all", "mcp"}, {"mcp", "--session", "s"}, {"mcp", "1 + 1"}}) {
    Parsed p = Parse(args);
    EXPECT_EQ(p.line.action, Action::kExit) << args[0] << " " << args[1];
    EXPECT_EQ(p.line.exit_code, kExitUsage);
    EXPECT_EQ(p.err.rfind("dolsot: error: ", 0), 0u) << p.err;
  }
  Parsed p = Parse({"--session", "s", "mcp"});
  EXPECT_NE(p.err.find("mcp cannot be combined with --session"), std::string::npos) << p.err;
}

TEST(CommandLineTest, TheWordMcpAsCodeGoesAfterTheDoubleDash) {
  Parsed p = Parse({"--session", "s", "--", "mcp"});
  EXPECT_EQ(p.line.action, Action::kRun);
  EXPECT_EQ(p.line.run.code_words, std::vector<std::string>{"mcp"});
}

TEST(CommandLineTest, McpHelpDescribesTheSubcommand) {
  Parsed p = Parse({"mcp", "--help"});
  EXPECT_EQ(p.line.exit_code, kExitOk);
  EXPECT_NE(p.out.find("Model Context Protocol"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("--toolbox"), std::string::npos);
  EXPECT_EQ(p.out.find("--session"), std::string::npos) << "not a flag of mcp";
}

// "dolsot serve ..." goes to ServeCommand before the parser (main.cc); after a
// global flag the word is the subcommand too, never a cell's code.
TEST(CommandLineTest, ServeAfterJsonIsTheServeCommandWithJson) {
  Parsed p = Parse({"--json", "serve", "--status"});
  EXPECT_EQ(p.line.action, Action::kServe) << p.err;
  EXPECT_EQ(p.line.serve_args, (std::vector<std::string>{"serve", "--json", "--status"}));
  EXPECT_TRUE(p.line.run.code_words.empty());
  p = Parse({"--json", "serve", "--stop", "--json"});
  EXPECT_EQ(p.line.action, Action::kServe) << p.err;
  EXPECT_EQ(p.line.serve_args, (std::vector<std::string>{"serve", "--json", "--stop", "--json"}));
  p = Parse({"--json", "serve", "--help"});
  EXPECT_EQ(p.line.action, Action::kServe) << "serve's own help, not the top-level one";
  EXPECT_EQ(p.line.serve_args, (std::vector<std::string>{"serve", "--json", "--help"}));
  EXPECT_TRUE(p.out.empty()) << p.out;
}

TEST(CommandLineTest, ServeDoesNotCombineWithTheRunCommandsWork) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--no-serve", "serve"}, {"--session", "s", "serve"}, {"-s", "s", "--json", "serve", "--status"},
           {"--list-sessions", "serve"}, {"--reset", "all", "serve"}, {"--timeout", "5", "serve"},
           {"--session", "s", "mcp"}, {"--no-serve", "mcp"}}) {
    Parsed p = Parse(args);
    EXPECT_EQ(p.line.action, Action::kExit) << args[0] << " " << args[1];
    EXPECT_EQ(p.line.exit_code, kExitUsage);
    EXPECT_EQ(p.err.rfind("dolsot: error: ", 0), 0u) << p.err;
    EXPECT_TRUE(p.line.run.code_words.empty()) << "never a cell";
  }
  Parsed p = Parse({"--no-serve", "serve"});
  EXPECT_NE(p.err.find("serve cannot be combined with --no-serve (its options go after the word serve)"),
            std::string::npos) << p.err;
  p = Parse({"--session", "s", "serve"});
  EXPECT_NE(p.err.find("serve cannot be combined with --session"), std::string::npos) << p.err;
}

TEST(CommandLineTest, TheWordServeAsCodeGoesAfterTheDoubleDash) {
  Parsed p = Parse({"--session", "s", "--", "serve"});
  EXPECT_EQ(p.line.action, Action::kRun);
  EXPECT_EQ(p.line.run.code_words, std::vector<std::string>{"serve"});
}

}  // namespace
}  // namespace dolsot::cli
