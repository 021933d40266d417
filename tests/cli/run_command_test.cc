// The commands against a fake backend: the output contract, exit codes, and
// that bad input never reaches the backend.
#include "cli/run_command.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/bounded_text.h"
#include "core/exit_codes.h"
#include "cli/list_sessions_command.h"
#include "cli/reset_command.h"

namespace dolsot::cli {
namespace {

// Records what reaches it and answers with canned values.
struct FakeState {
  int opened = 0;
  int runs = 0;
  int closed = 0;
  BackendSettings settings;
  std::string session;
  std::string code;
  StatusOr<Result> result = Result{};
  std::vector<SessionInfo> sessions;
  std::string reset_target;
  std::vector<std::string> live_chunks;  // handed to RunOptions::live before the Result
};

class FakeBackend final : public Backend {
 public:
  explicit FakeBackend(FakeState& state) : state_(state) {}
  StatusOr<Result> Run(std::string_view session_id, std::string_view code,
                       const RunOptions& options) override {
    if (options.live.on_output) {
      for (const std::string& chunk : state_.live_chunks) options.live.on_output(chunk);
    }
    ++state_.runs;
    state_.session = session_id;
    state_.code = code;
    return state_.result;
  }
  const Capabilities& capabilities() const override {
    static const Capabilities kNone;
    return kNone;
  }
  Status Interrupt(std::string_view) override { return Status::Ok(); }
  StatusOr<std::vector<SessionInfo>> Sessions() override { return state_.sessions; }
  StatusOr<int> Reset(std::string_view target) override {
    state_.reset_target = target;
    return 2;
  }
  Status Close() override {
    ++state_.closed;
    return Status::Ok();
  }

 private:
  FakeState& state_;
};

class CommandTest : public ::testing::Test {
 protected:
  CommandContext Context(bool json = false, bool terminal = false) {
    return CommandContext{out_, err_, in_, terminal, json,
                          [this](const BackendSettings& settings)
                              -> StatusOr<std::unique_ptr<Backend>> {
                            ++state_.opened;
                            state_.settings = settings;
                            return std::unique_ptr<Backend>(new FakeBackend(state_));
                          },
                          [] { return 1'000'000.0; }};
  }
  RunArgs Args(std::optional<std::string> code) {
    RunArgs args;
    args.session = "work";
    args.code = std::move(code);
    return args;
  }

  FakeState state_;
  std::ostringstream out_, err_;
  std::istringstream in_;
};

TEST_F(CommandTest, StdoutThenValueOnStdoutBannerOnStderr) {
  Result result;
  result.stdout_text = "hello\n";
  result.value = "42";
  result.held = {"x"};
  state_.result = result;
  EXPECT_EQ(RunCommand(Args("print('hello'); x = 42; x"), Context()), kExitOk);
  EXPECT_EQ(out_.str(), "hello\n42\n");
  EXPECT_EQ(err_.str(), "session now holds: x\n");
  EXPECT_EQ(state_.session, "work");
  EXPECT_EQ(state_.closed, 1);
}

// Streamed (issue #40): what went live and what is printed at the end are,
// together, the bytes printed without streaming, cut output or not.
TEST_F(CommandTest, StreamedStdoutPlusTheRestIsTheSameBytes) {
  struct Case {
    std::string raw;
    std::size_t max_output;
  };
  for (const Case& c : {Case{"hello\nworld\n", 100}, Case{std::string(300, 'x') + "tail\n", 40},
                        Case{"\xeb\x8f\x8c\xec\x86\xa5 and more text past the head\n", 8}}) {
    Result result;
    result.stdout_text = CapOutput(c.raw, c.max_output);
    result.value = "7";
    state_.result = result;
    state_.live_chunks = {c.raw.substr(0, 3), c.raw.substr(3)};
    out_.str("");
    CommandContext plain = Context();
    EXPECT_EQ(RunCommand(Args("cell"), plain), 0);
    const std::string expected = out_.str();

    out_.str("");
    std::string live;
    CommandContext streaming = Context();
    streaming.stream_out = [&live](std::string_view text) { live.append(text); };
    streaming.stream_max_output = c.max_output;
    EXPECT_EQ(RunCommand(Args("cell"), streaming), 0);
    EXPECT_FALSE(live.empty());
    EXPECT_EQ(live + out_.str(), expected) << c.raw;
    EXPECT_LE(CountCodePoints(live), c.max_output / 2);
  }
}

TEST_F(CommandTest, ValueStartsOnItsOwnLine) {
  Result result;
  result.stdout_text = "no newline";
  result.value = "1";
  state_.result = result;
  RunCommand(Args("code"), Context());
  EXPECT_EQ(out_.str(), "no newline\n1\n");
}

TEST_F(CommandTest, ErrorAndDroppedGoToStderrAndTheExitCodeIsTheResults) {
  Result result;
  result.ok = false;
  result.error = "mytools.ToolError: not found";
  result.exit_code = 3;
  result.dropped = {"conn"};
  state_.result = result;
  EXPECT_EQ(RunCommand(Args("mt.load('x')"), Context()), 3);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(), "mytools.ToolError: not found\n" + result.DroppedBanner() +
                            "\nsession now holds: nothing\n");
}

TEST_F(CommandTest, ACellWhoseStateWasNotSavedIsAFailure) {
  // It ran, but the next call would not see what it did (a full disk).
  Result result;
  result.held = {"y"};
  result.error = "warning: checkpoint not saved: disk full";
  result.save_error = "disk full";
  state_.result = result;
  EXPECT_EQ(RunCommand(Args("y = 1"), Context()), kExitNotSaved);
  EXPECT_NE(err_.str().find("checkpoint not saved: disk full"), std::string::npos);
  Result failed = result;
  failed.ok = false;
  failed.exit_code = 3;
  state_.result = failed;
  EXPECT_EQ(RunCommand(Args("y = 1"), Context()), 3) << "the cell's own failure comes first";
}

TEST_F(CommandTest, JsonPutsTheWholeResultOnStdout) {
  Result result;
  result.value = "2";
  state_.result = result;
  EXPECT_EQ(RunCommand(Args("1 + 1"), Context(/*json=*/true)), kExitOk);
  EXPECT_EQ(out_.str().rfind("{\"ok\":true,\"value\":\"2\"", 0), 0u) << out_.str();
  EXPECT_EQ(err_.str(), "");
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

// A directory of its own, removed with what is in it.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    char pattern[] = "/tmp/dolsot-cli-figures-XXXXXX";
    path_ = ::mkdtemp(pattern);
  }
  ~ScratchDirectory() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST_F(CommandTest, FiguresAreWrittenToFilesNamedAfterTheBanner) {
  ScratchDirectory directory;
  Result result;
  result.images = {std::string("\x89PNG\0one", 8), "two"};
  state_.result = result;
  CommandContext context = Context();
  context.image_directory = directory.path();
  EXPECT_EQ(RunCommand(Args("plot()"), context), kExitOk);
  const std::string first = directory.path() + "/dolsot-work-1.png";
  const std::string second = directory.path() + "/dolsot-work-2.png";
  EXPECT_EQ(err_.str(), "session now holds: nothing\nfigure: " + first + "\nfigure: " + second + "\n");
  EXPECT_EQ(ReadFile(first), result.images[0]);
  EXPECT_EQ(ReadFile(second), "two");
  // The next call never overwrites them.
  err_.str("");
  RunCommand(Args("plot()"), context);
  EXPECT_NE(err_.str().find("figure: " + directory.path() + "/dolsot-work-3.png\n"), std::string::npos)
      << err_.str();
  EXPECT_EQ(ReadFile(second), "two");
}

TEST_F(CommandTest, JsonCarriesTheFigurePaths) {
  ScratchDirectory directory;
  Result result;
  result.images = {"png"};
  state_.result = result;
  CommandContext context = Context(/*json=*/true);
  context.image_directory = directory.path();
  RunCommand(Args("plot()"), context);
  EXPECT_NE(out_.str().find("\"images\":[\"" + directory.path() + "/dolsot-work-1.png\"]"),
            std::string::npos)
      << out_.str();
  EXPECT_EQ(err_.str(), "");
}

TEST_F(CommandTest, AFigureThatCannotBeWrittenIsAWarningNotAFailure) {
  Result result;
  result.value = "1";
  result.images = {"png"};
  state_.result = result;
  CommandContext context = Context();
  context.image_directory = "/nonexistent-dolsot-directory";
  EXPECT_EQ(RunCommand(Args("plot()"), context), kExitOk);
  EXPECT_EQ(out_.str(), "1\n");
  EXPECT_NE(err_.str().find("dolsot: warning: cannot write the figure "
                            "/nonexistent-dolsot-directory/dolsot-work-1.png: No such file"),
            std::string::npos)
      << err_.str();
}

TEST_F(CommandTest, CodeComesFromStdinWhenNotGiven) {
  in_.str("2 ** 10\n");
  EXPECT_EQ(RunCommand(Args(std::nullopt), Context()), kExitOk);
  EXPECT_EQ(state_.code, "2 ** 10\n");
}

TEST_F(CommandTest, CodeWordsAreJoinedWithSpaces) {
  RunArgs args = Args(std::nullopt);
  args.code_words = {"print(1,", "2)"};
  EXPECT_EQ(RunCommand(args, Context()), kExitOk);
  EXPECT_EQ(state_.code, "print(1, 2)");
}

TEST_F(CommandTest, AStoreRefusedWhileOpeningIsAUsageError) {
  CommandContext context = Context();
  context.open_backend = [](const BackendSettings&) -> StatusOr<std::unique_ptr<Backend>> {
    return Status(ErrorCode::kIo, "cannot create /x/sessions: Not a directory");
  };
  EXPECT_EQ(RunCommand(Args("1"), context), kExitUsage);
  EXPECT_EQ(ListSessionsCommand({true}, context), kExitUsage);
  EXPECT_EQ(ResetCommand({"all"}, context), kExitUsage);
}

TEST_F(CommandTest, NoCodeFromATerminalIsAUsageError) {
  EXPECT_EQ(RunCommand(Args(std::nullopt), Context(false, /*terminal=*/true)), kExitUsage);
  EXPECT_NE(err_.str().find("no code to run"), std::string::npos);
  EXPECT_EQ(state_.opened, 0);
}

TEST_F(CommandTest, SettingsReachTheBackend) {
  RunArgs args = Args("1");
  args.toolbox_specs = {"mytools:mt", "pkg.sub:ps"};
  args.timeout_seconds = 5;
  args.gate = true;
  args.max_repr = 300;
  args.max_text = 0;
  RunCommand(args, Context());
  EXPECT_EQ(state_.settings.max_repr, 300u);
  EXPECT_EQ(state_.settings.max_text, 0u);
  EXPECT_EQ(state_.settings.toolboxes,
            (std::map<std::string, std::string>{{"mt", "mytools"}, {"ps", "pkg.sub"}}));
  EXPECT_EQ(state_.settings.timeout_seconds, 5);
  EXPECT_TRUE(state_.settings.gate);
}

// Each bad request is a usage error naming the problem; nothing is opened.
struct BadRequest {
  const char* name;
  std::function<void(RunArgs&)> spoil;
  const char* message;
};

class BadRequestTest : public CommandTest, public ::testing::WithParamInterface<BadRequest> {};

TEST_P(BadRequestTest, IsAUsageErrorAndNeverReachesTheBackend) {
  RunArgs args = Args("1 + 1");
  GetParam().spoil(args);
  EXPECT_EQ(RunCommand(args, Context()), kExitUsage);
  EXPECT_EQ(err_.str().rfind("dolsot: error: ", 0), 0u) << err_.str();
  EXPECT_NE(err_.str().find(GetParam().message), std::string::npos) << err_.str();
  EXPECT_EQ(state_.opened, 0);
  EXPECT_EQ(out_.str(), "");
}

INSTANTIATE_TEST_SUITE_P(
    Requests, BadRequestTest,
    ::testing::Values(
        BadRequest{"NoSession", [](RunArgs& a) { a.session.reset(); }, "--session is required"},
        BadRequest{"BadSessionId", [](RunArgs& a) { a.session = "../etc"; }, "session"},
        BadRequest{"SessionAll", [](RunArgs& a) { a.session = "all"; }, "all"},
        BadRequest{"EmptyCode", [](RunArgs& a) { a.code = "  \n"; }, "empty"},
        BadRequest{"NulByte", [](RunArgs& a) { a.code = std::string("x\0", 2); }, "NUL byte"},
        BadRequest{"InvalidUtf8", [](RunArgs& a) { a.code = "'\xC3'"; }, "UTF-8"},
        BadRequest{"HugeCell", [](RunArgs& a) { a.code = std::string(10 << 20, 'x'); },
                   "larger than"},
        BadRequest{"ZeroTimeout", [](RunArgs& a) { a.timeout_seconds = 0; }, "--timeout"},
        BadRequest{"NegativeMaxRepr", [](RunArgs& a) { a.max_repr = -1; }, "--max-repr"},
        BadRequest{"NegativeMaxText", [](RunArgs& a) { a.max_text = -5; }, "--max-text"},
        BadRequest{"NoColon", [](RunArgs& a) { a.toolbox_specs = {"mytools"}; }, "no ':'"},
        BadRequest{"EmptyModule", [](RunArgs& a) { a.toolbox_specs = {":mt"}; },
                   "module is empty"},
        BadRequest{"EmptyAlias", [](RunArgs& a) { a.toolbox_specs = {"mytools:"}; },
                   "alias is empty"},
        BadRequest{"BadAlias", [](RunArgs& a) { a.toolbox_specs = {"mytools:m-t"}; },
                   "is not a valid alias"},
        BadRequest{"BadModule", [](RunArgs& a) { a.toolbox_specs = {"my..tools:mt"}; },
                   "not a module name"},
        BadRequest{"DuplicateAlias",
                   [](RunArgs& a) { a.toolbox_specs = {"a:mt", "b:mt"}; }, "already used"}),
    [](const auto& info) { return info.param.name; });

TEST_F(CommandTest, MissingSessionExplainsWhySessionsMatter) {
  RunArgs args = Args("1");
  args.session.reset();
  RunCommand(args, Context());
  EXPECT_NE(err_.str().find("persists per session id"), std::string::npos) << err_.str();
}

TEST_F(CommandTest, BackendErrorsMapToExitCodes) {
  state_.result = Status(ErrorCode::kUnavailable, "worker died");
  EXPECT_EQ(RunCommand(Args("1"), Context()), kExitFailure);
  EXPECT_EQ(err_.str(), "dolsot: error: worker died\n");
}

TEST_F(CommandTest, ConfigErrorFromOpeningTheBackendIsAUsageError) {
  CommandContext context = Context();
  context.open_backend = [](const BackendSettings&) -> StatusOr<std::unique_ptr<Backend>> {
    return Status(ErrorCode::kConfig, "DOLSOT_TIMEOUT must be a number, got 'abc'");
  };
  EXPECT_EQ(RunCommand(Args("1"), context), kExitUsage);
  EXPECT_EQ(err_.str(), "dolsot: error: DOLSOT_TIMEOUT must be a number, got 'abc'\n");
}

TEST_F(CommandTest, ListSessionsIsATableMostRecentFirst) {
  state_.sessions = {{"old", 10, 1'000'000 - 7200}, {"new", 2500, 1'000'000 - 5}};
  EXPECT_EQ(ListSessionsCommand({true}, Context()), kExitOk);
  EXPECT_EQ(out_.str(),
            "SESSION    SIZE  LAST USED\n"
            "new      2.5 kB  5 s ago\n"
            "old        10 B  2 h ago\n");
}

TEST_F(CommandTest, ListSessionsEmptyAndJson) {
  EXPECT_EQ(ListSessionsCommand({true}, Context()), kExitOk);
  EXPECT_EQ(out_.str(), "no sessions\n");
  out_.str("");
  EXPECT_EQ(ListSessionsCommand({true}, Context(/*json=*/true)), kExitOk);
  EXPECT_EQ(out_.str(), "[]\n");
}

TEST_F(CommandTest, ResetForwardsTheTargetAndReportsTheCount) {
  EXPECT_EQ(ResetCommand({"all"}, Context()), kExitOk);
  EXPECT_EQ(state_.reset_target, "all");
  EXPECT_EQ(out_.str(), "removed 2 sessions\n");
}

TEST_F(CommandTest, ResetOfAnInvalidIdIsAUsageError) {
  EXPECT_EQ(ResetCommand({"../x"}, Context()), kExitUsage);
  EXPECT_EQ(state_.opened, 0);
}

}  // namespace
}  // namespace dolsot::cli
