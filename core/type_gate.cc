// The type gate: writes the cell behind a stub prelude into a private temp
// project, runs `ty check` on it under the cell's deadline, and keeps the
// diagnostics about calls into the toolboxes. Any failure of ty fails open.
#include "core/type_gate.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "core/config.h"

extern char** environ;

namespace dolsot {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxTyOutput = 8u << 20;  // more than this: ty misbehaves
constexpr const char* kCellFile = "cell.py";
constexpr const char* kAnyAlias = "_dolsot_Any_";

// sys.stdlib_module_names of the interpreter the worker embeds (the one the
// project is built with), comma-separated; written at configure time by
// core/CMakeLists.txt. Empty: unknown, and the skip rule below never applies.
constexpr std::string_view kStdlibModuleNames =
#if __has_include("stdlib_module_names.inc")
#include "stdlib_module_names.inc"
#else
    ""
#endif
    ;

// ty rules about the arguments of a call; only these (and a toolbox's missing
// attributes) can reject a cell. Everything else ty says is ignored, so code
// ty cannot follow never causes a false rejection.
const std::set<std::string, std::less<>>& CallRules() {
  static const std::set<std::string, std::less<>> rules = {
      "invalid-argument-type",    "missing-argument",
      "too-many-positional-arguments", "unknown-argument",
      "parameter-already-assigned", "no-matching-overload",
      "positional-only-parameter-as-kwarg"};
  return rules;
}

// ---------------------------------------------------------------- names ----

bool IsKeyword(std::string_view name) {
  static const std::set<std::string_view> keywords = {
      "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
      "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
      "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise",
      "return", "try", "while", "with", "yield"};
  return keywords.count(name) != 0;
}

// A Python identifier (non-ASCII letters allowed as-is), not a keyword.
bool IsIdentifier(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9') || IsKeyword(name)) return false;
  for (unsigned char c : name) {
    if (!(std::isalnum(c) || c == '_' || c >= 0x80)) return false;
  }
  return true;
}

bool IsDottedName(std::string_view name) {
  std::size_t start = 0;
  while (true) {
    std::size_t dot = name.find('.', start);
    if (!IsIdentifier(name.substr(start, dot - start))) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// ------------------------------------------------------------- prelude ----

struct Prelude {
  std::string text;
  int lines = 0;
};

// Binds every toolbox alias to its module and declares every name earlier
// cells bound as Any, so the cell is checked as it would run in the session.
Prelude BuildPrelude(const TypeCheckRequest& request) {
  Prelude out;
  auto add = [&out](const std::string& line) {
    out.text += line + '\n';
    ++out.lines;
  };
  for (const auto& [alias, module] : request.toolboxes) {
    if (IsIdentifier(alias) && IsDottedName(module)) add("import " + module + " as " + alias);
  }
  add(std::string("from typing import Any as ") + kAnyAlias);
  for (const auto& name : request.session_names) {
    if (IsIdentifier(name) && request.toolboxes.count(name) == 0 && name != kAnyAlias) {
      add(name + ": " + kAnyAlias + " = ...");
    }
  }
  return out;
}

// A `from __future__` import must open the file, so a prelude would break it.
bool HasFutureImport(std::string_view code) {
  std::istringstream in{std::string(code)};
  for (std::string line; std::getline(in, line);) {
    std::size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line.compare(first, 16, "from __future__ ") == 0) {
      return true;
    }
  }
  return false;
}

// ------------------------------------------------------- temp project ----

// A private directory holding the cell file; removed with everything in it.
class TempProject {
 public:
  static StatusOr<std::unique_ptr<TempProject>> Create() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/dolsot-ty-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      return IoError("cannot create a temp dir for ty: " + std::string(std::strerror(errno)));
    }
    return std::unique_ptr<TempProject>(new TempProject(pattern));
  }
  ~TempProject() {
    if (dir_.empty()) return;  // disowned
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  // Leaves the directory in place (it belongs to another process).
  void Disown() { dir_.clear(); }
  TempProject(const TempProject&) = delete;
  TempProject& operator=(const TempProject&) = delete;

  const std::string& dir() const { return dir_; }
  std::string PathOf(const std::string& name) const { return dir_ + "/" + name; }

  Status Write(const std::string& name, std::string_view text) const {
    std::ofstream file(PathOf(name), std::ios::binary | std::ios::trunc);
    file.write(text.data(), static_cast<std::streamsize>(text.size()));
    file.close();
    if (!file) return IoError("cannot write " + PathOf(name));
    return Status::Ok();
  }

 private:
  explicit TempProject(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

// --------------------------------------------------------- the process ----

// A pipe whose ends close themselves.
struct Pipe {
  int read_end = -1;
  int write_end = -1;
  ~Pipe() {
    if (read_end >= 0) close(read_end);
    if (write_end >= 0) close(write_end);
  }
  Status Open() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return IoError("pipe: " + std::string(std::strerror(errno)));
    read_end = fds[0];
    write_end = fds[1];
    return Status::Ok();
  }
  void CloseWrite() {
    if (write_end >= 0) close(write_end);
    write_end = -1;
  }
};

// A spawned child leading its own process group; killed (the whole group)
// and reaped on every path that leaves it running.
class ChildGroup {
 public:
  explicit ChildGroup(pid_t pid) : pid_(pid) {}
  ~ChildGroup() {
    if (pid_ > 0) {
      KillGroup();
      Reap();
    }
  }
  ChildGroup(const ChildGroup&) = delete;
  ChildGroup& operator=(const ChildGroup&) = delete;

  void KillGroup() const { kill(-pid_, SIGKILL); }
  // Forgets the child without killing it (it belongs to another process).
  void Disown() { pid_ = -1; }
  // Waits for the child; returns its wait status.
  int Reap() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_;
};

struct ProcessOutput {
  int wait_status = 0;
  bool timed_out = false;
  bool overflowed = false;
  std::string out;
  std::string err;
};

// Starts argv[0] in its own process group with all signals at their default
// dispositions; fd -1 for a standard stream means /dev/null.
StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, int stdin_fd, int stdout_fd,
                      int stderr_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  const int fds[3] = {stdin_fd, stdout_fd, stderr_fd};
  for (int target = 0; target < 3; ++target) {
    if (fds[target] < 0) {
      posix_spawn_file_actions_addopen(&actions, target, "/dev/null",
                                       target == 0 ? O_RDONLY : O_WRONLY, 0);
    } else {
      posix_spawn_file_actions_adddup2(&actions, fds[target], target);
    }
  }
  sigset_t all;
  sigset_t none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);  // e.g. a host ignoring SIGPIPE
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return IoError("cannot run " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

// Milliseconds left before `deadline`, for poll (0 when it has passed).
int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > 60000 ? 60000 : static_cast<int>(left.count()) + 1;
}

// Drains stdout and stderr until both close, the deadline passes or the
// output grows past kMaxTyOutput. Returns false when it stopped early.
bool Drain(int out_fd, int err_fd, Clock::time_point deadline, ProcessOutput& result) {
  std::array<pollfd, 2> fds = {pollfd{out_fd, POLLIN, 0}, pollfd{err_fd, POLLIN, 0}};
  std::array<std::string*, 2> sinks = {&result.out, &result.err};
  int open_count = 2;
  char buffer[65536];
  while (open_count > 0) {
    int wait_ms = MillisLeft(deadline);
    if (wait_ms == 0) {
      result.timed_out = true;
      return false;
    }
    int ready = poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return false;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        fds[i].fd = -1;
        --open_count;
        continue;
      }
      sinks[i]->append(buffer, static_cast<std::size_t>(n));
      if (sinks[i]->size() > kMaxTyOutput) {
        result.overflowed = true;
        return false;
      }
    }
  }
  return true;
}

// Runs argv with stdin empty, capturing stdout and stderr, in its own process
// group; past `deadline` the group is killed. The child is always reaped.
StatusOr<ProcessOutput> RunWithDeadline(const std::vector<std::string>& argv,
                                        Clock::time_point deadline) {
  Pipe out;
  Pipe err;
  DOLSOT_RETURN_IF_ERROR(out.Open());
  DOLSOT_RETURN_IF_ERROR(err.Open());
  StatusOr<pid_t> pid = Spawn(argv, -1, out.write_end, err.write_end);
  if (!pid.ok()) return pid.status();
  ChildGroup child(*pid);
  out.CloseWrite();
  err.CloseWrite();
  ProcessOutput result;
  if (!Drain(out.read_end, err.read_end, deadline, result)) child.KillGroup();
  result.wait_status = child.Reap();
  return result;
}

// ------------------------------------------------------------ binaries ----

// The absolute path of an executable `bin` (searched on PATH when it has no
// slash), or an error saying it is missing.
StatusOr<std::string> ResolveBinary(const std::string& bin) {
  if (bin.empty()) return InvalidArgument("ty_bin is empty");
  if (bin.find('/') != std::string::npos) {
    if (access(bin.c_str(), X_OK) == 0) return bin;
    return IoError("ty not found at " + bin);
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + bin;
    struct stat info;
    if (stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return IoError("ty not found on PATH (" + bin + "); install dolsot[typecheck]");
}

// A directory of the interpreter's own standard library. Passed to ty as a
// search path, its sources would shadow typeshed's stubs (typing.Any stops
// being Any), so it is never passed.
bool IsStdlibDir(const std::filesystem::path& dir) {
  std::error_code ec;
  return dir.filename() == "lib-dynload" || std::filesystem::exists(dir / "typing.py", ec) ||
         std::filesystem::exists(dir / "os.py", ec);
}

// The request's python_path as absolute directories, in order, once each:
// "" (sys.path's "current directory") becomes the cwd; entries that are not
// directories (a zip, a missing dir: ty rejects them) and the stdlib's own
// directories are dropped.
std::vector<std::string> SearchDirs(const TypeCheckRequest& request) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& entry : request.python_path) {
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::absolute(entry.empty() ? "." : entry, ec);
    if (ec || !std::filesystem::is_directory(dir, ec) || IsStdlibDir(dir)) continue;
    std::string text = dir.lexically_normal().string();
    if (text.size() > 1 && text.back() == '/') text.pop_back();
    if (seen.insert(text).second) out.push_back(text);
  }
  return out;
}

std::vector<std::string> TyArgv(const std::string& ty, const TypeCheckRequest& request,
                                const TempProject& project) {
  std::vector<std::string> argv = {ty,           "check",        "--output-format", "full",
                                   "--color",    "never",        "--no-progress",
                                   "--project",  project.dir()};
  if (!request.python_executable.empty()) {
    argv.insert(argv.end(), {"--python", request.python_executable});
  }
  for (const auto& dir : SearchDirs(request)) argv.insert(argv.end(), {"--extra-search-path", dir});
  argv.push_back(project.PathOf(kCellFile));
  return argv;
}

// --------------------------------------------------------- the output ----

// One diagnostic of ty's "full" output format (pinned ty version: see
// docs/toolbox.md), before it is filtered and mapped back to the cell.
struct RawDiagnostic {
  std::string rule;
  std::string message;
  std::string file;
  int line = 0;
  int column = 0;
  std::string detail;                      // the label under the primary span
  std::vector<std::string> related_files;  // "info: ... here" locations
};

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// "error[rule]: message" (also warning/info); false for any other line.
bool ParseHeader(const std::string& line, RawDiagnostic& out) {
  std::size_t open = line.find('[');
  if (open == std::string::npos || open == 0) return false;
  std::string_view severity(line.data(), open);
  if (severity != "error" && severity != "warning" && severity != "info") return false;
  std::size_t close = line.find("]: ", open);
  if (close == std::string::npos) return false;
  out = RawDiagnostic{};
  out.rule = line.substr(open + 1, close - open - 1);
  out.message = line.substr(close + 3);
  return true;
}

// " --> path:line:col"; false for any other line.
bool ParseLocation(const std::string& line, std::string& file, int& row, int& col) {
  std::size_t arrow = line.find("--> ");
  if (arrow == std::string::npos || line.find_first_not_of(' ') != arrow) return false;
  std::string rest = line.substr(arrow + 4);
  std::size_t c2 = rest.rfind(':');
  std::size_t c1 = c2 == std::string::npos || c2 == 0 ? std::string::npos : rest.rfind(':', c2 - 1);
  if (c1 == std::string::npos) return false;
  row = std::atoi(rest.c_str() + c1 + 1);
  col = std::atoi(rest.c_str() + c2 + 1);
  file = rest.substr(0, c1);
  return row > 0 && col > 0;
}

// The text after the carets of a snippet line "  |     ^^^ Expected `int`".
std::string CaretLabel(const std::string& line) {
  std::size_t bar = line.find('|');
  std::size_t caret = line.find('^');
  if (bar == std::string::npos || caret == std::string::npos || caret < bar) return "";
  std::size_t end = line.find_first_not_of('^', caret);
  if (end == std::string::npos) return "";
  std::size_t start = line.find_first_not_of(' ', end);
  return start == std::string::npos ? "" : line.substr(start);
}

std::vector<RawDiagnostic> ParseTyOutput(const std::string& text) {
  std::vector<RawDiagnostic> out;
  RawDiagnostic current;
  bool in_block = false;
  bool want_related = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    RawDiagnostic header;
    if (ParseHeader(line, header)) {
      if (in_block) out.push_back(std::move(current));
      current = std::move(header);
      in_block = true;
      want_related = false;
      continue;
    }
    if (!in_block) continue;
    std::string file;
    int row = 0;
    int col = 0;
    if (ParseLocation(line, file, row, col)) {
      if (current.line == 0) {
        current.file = file;
        current.line = row;
        current.column = col;
      } else if (want_related) {
        current.related_files.push_back(file);
      }
      want_related = false;
    } else if (StartsWith(line, "info: ")) {
      want_related = true;
    } else if (current.detail.empty() && current.related_files.empty() && !want_related) {
      current.detail = CaretLabel(line);
    }
  }
  if (in_block) out.push_back(std::move(current));
  return out;
}

// ------------------------------------------------------------- filter ----

// True when `file` is (inside) the source of module `module`.
bool FileBelongsTo(const std::string& file, const std::string& module) {
  std::string rel = "/" + module;
  for (char& c : rel) c = c == '.' ? '/' : c;
  return file.find(rel + "/") != std::string::npos || file.ends_with(rel + ".py") ||
         file.ends_with(rel + ".pyi");
}

// The name inside the first `backticks` after `marker` in `message`.
std::string BacktickedAfter(const std::string& message, const std::string& marker) {
  std::size_t at = message.find(marker);
  if (at == std::string::npos) return "";
  std::size_t open = at + marker.size();
  std::size_t close = message.find('`', open);
  return close == std::string::npos ? "" : message.substr(open, close - open);
}

// True when `line` holds `alias.callee` (as whole names) for some toolbox alias.
bool LineCallsThroughAlias(const std::string& line, const std::string& callee,
                           const TypeCheckRequest& request) {
  if (callee.empty()) return false;
  for (const auto& entry : request.toolboxes) {
    std::string needle = entry.first + "." + callee;
    for (std::size_t at = line.find(needle); at != std::string::npos;
         at = line.find(needle, at + 1)) {
      auto is_name = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
      bool left_ok = at == 0 || (!is_name(line[at - 1]) && line[at - 1] != '.');
      std::size_t end = at + needle.size();
      bool right_ok = end >= line.size() || !is_name(line[end]);
      if (left_ok && right_ok) return true;
    }
  }
  return false;
}

std::string CellLine(std::string_view code, int line) {
  std::istringstream in{std::string(code)};
  std::string text;
  for (int i = 0; i < line && std::getline(in, text); ++i) {
  }
  return text;
}

// Whether a diagnostic is about a call into a toolbox (or a toolbox's missing
// attribute): only those reject a cell.
bool MattersForToolbox(const RawDiagnostic& d, const TypeCheckRequest& request, int cell_line) {
  if (d.rule == "missing-attribute") {
    std::string module = BacktickedAfter(d.message, "Module `");
    for (const auto& entry : request.toolboxes) {
      if (entry.second == module) return true;
    }
    return false;
  }
  if (CallRules().count(d.rule) == 0) return false;
  if (!d.related_files.empty()) {
    for (const auto& entry : request.toolboxes) {
      if (FileBelongsTo(d.related_files.front(), entry.second)) return true;
    }
    return false;
  }
  std::string callee = BacktickedAfter(d.message, "function `");
  return LineCallsThroughAlias(CellLine(request.code, cell_line), callee, request);
}

TypeCheckOutcome FailOpen(std::string note) {
  TypeCheckOutcome out;
  out.note = std::move(note);
  return out;
}

std::string FirstLine(const std::string& text) {
  std::size_t start = text.find_first_not_of("\n ");
  if (start == std::string::npos) return "";
  return text.substr(start, text.find('\n', start) - start);
}

// Explains a ty run that produced no usable verdict, or "" when it did.
std::string ExplainFailure(const ProcessOutput& run) {
  if (run.timed_out) return "ty did not finish before the cell's deadline; killed";
  if (run.overflowed) return "ty wrote more output than expected; killed";
  if (WIFSIGNALED(run.wait_status)) {
    return "ty died of signal " + std::to_string(WTERMSIG(run.wait_status));
  }
  int code = WIFEXITED(run.wait_status) ? WEXITSTATUS(run.wait_status) : -1;
  if (code == 0 || code == 1) return "";
  return "ty exited with status " + std::to_string(code) + ": " + FirstLine(run.err);
}

TypeCheckOutcome Collect(const std::vector<RawDiagnostic>& raw, const TypeCheckRequest& request,
                         const Prelude& prelude, const std::string& cell_path) {
  TypeCheckOutcome out;
  out.ran = true;
  for (const RawDiagnostic& d : raw) {
    int cell_line = d.line - prelude.lines;
    if (d.file != cell_path || cell_line <= 0) continue;
    if (!MattersForToolbox(d, request, cell_line)) continue;
    std::string message = d.message;
    if (!d.detail.empty()) message += ": " + d.detail;
    out.diagnostics.push_back({d.rule, message, cell_line, d.column});
  }
  return out;
}

Clock::time_point EffectiveDeadline(Clock::time_point deadline) {
  if (deadline == Clock::time_point{}) {
    return Clock::now() + std::chrono::milliseconds(
                              static_cast<long long>(kDefaultTimeoutSeconds * 1000));
  }
  return deadline;
}

bool IsNameChar(unsigned char c) { return std::isalnum(c) || c == '_'; }

// True when `word` occurs in `code` as a whole name (not inside a longer one).
bool ContainsName(std::string_view code, std::string_view word) {
  for (std::size_t at = code.find(word); at != std::string_view::npos;
       at = code.find(word, at + 1)) {
    bool left_ok = at == 0 || !IsNameChar(static_cast<unsigned char>(code[at - 1]));
    std::size_t end = at + word.size();
    bool right_ok = end >= code.size() || !IsNameChar(static_cast<unsigned char>(code[end]));
    if (left_ok && right_ok) return true;
  }
  return false;
}

// True when the top-level package of `module` is a standard-library module,
// one of typeshed's stdlib-only stubs or a directory in the stub paths ty
// reports ("stdlib/builtins.pyi", "vendored://stdlib/..."): then
// FileBelongsTo could tie a builtin's diagnostic to the toolbox. Also true
// when the stdlib's names are unknown.
bool MayShareAStdlibName(const std::string& module) {
  if (kStdlibModuleNames.empty()) return true;
  std::string_view top = std::string_view(module).substr(0, module.find('.'));
  for (std::string_view stub : {"_typeshed", "typing_extensions", "mypy_extensions", "stdlib",
                                "vendored", "typeshed"}) {
    if (top == stub) return true;
  }
  std::string_view names = kStdlibModuleNames;
  for (std::size_t start = 0; start <= names.size();) {
    std::size_t comma = names.find(',', start);
    if (names.substr(start, comma - start) == top) return true;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return false;
}

// True when ty cannot have anything to say about a toolbox in this cell, so
// running it would only cost its start-up: the cell is pure ASCII (so no
// NFKC-equivalent spelling of an alias), never says `import` (nor
// __import__, importlib), names no toolbox alias, and no toolbox module
// shares a name with the standard library (whose stubs a cell reaches
// through builtins without importing anything). Every other name in the
// cell is either a builtin or a session name, which the prelude types as Any.
bool CannotReachAToolbox(const TypeCheckRequest& request) {
  for (unsigned char c : request.code) {
    if (c >= 0x80) return false;
  }
  if (request.code.find("import") != std::string_view::npos) return false;
  for (const auto& [alias, module] : request.toolboxes) {
    if (ContainsName(request.code, alias) || MayShareAStdlibName(module)) return false;
  }
  return true;
}

// The cases where ty is not run at all; nullopt when it should run.
std::optional<TypeCheckOutcome> SkipReason(const TypeCheckRequest& request,
                                           Clock::time_point deadline) {
  if (request.toolboxes.empty()) return FailOpen("no toolbox to check against");
  if (CannotReachAToolbox(request)) return FailOpen("the cell cannot reach a toolbox; not checked");
  if (HasFutureImport(request.code)) return FailOpen("cell has a __future__ import; not checked");
  if (Clock::now() >= deadline) return FailOpen("the cell's deadline passed before ty ran");
  return std::nullopt;
}

// The file ty checks: the prelude, then the cell, newline-terminated.
std::string CheckedSource(const Prelude& prelude, std::string_view code) {
  std::string source = prelude.text + std::string(code);
  if (!source.empty() && source.back() != '\n') source += '\n';
  return source;
}

}  // namespace

std::string TypeCheckOutcome::FormatError() const {
  std::string out;
  for (const auto& d : diagnostics) {
    if (!out.empty()) out += '\n';
    out += "type gate: line " + std::to_string(d.line) + ", col " + std::to_string(d.column) +
           ": " + d.message + " [" + d.rule + "]";
  }
  return out;
}

TypeCheckOutcome TypeCheckCell(const TypeCheckRequest& request) {
  Clock::time_point deadline = EffectiveDeadline(request.deadline);
  if (auto skip = SkipReason(request, deadline)) return *skip;
  StatusOr<std::string> ty = ResolveBinary(request.ty_bin);
  if (!ty.ok()) return FailOpen(ty.status().message());
  auto project = TempProject::Create();
  if (!project.ok()) return FailOpen(project.status().message());
  Prelude prelude = BuildPrelude(request);
  Status written = (*project)->Write(kCellFile, CheckedSource(prelude, request.code));
  if (!written.ok()) return FailOpen(written.message());
  StatusOr<ProcessOutput> run = RunWithDeadline(TyArgv(*ty, request, **project), deadline);
  if (!run.ok()) return FailOpen(run.status().message());
  std::string failure = ExplainFailure(*run);
  if (!failure.empty()) return FailOpen(failure);
  return Collect(ParseTyOutput(run->out), request, prelude, (*project)->PathOf(kCellFile));
}


// ============================================================ TyServer ====
// A minimal LSP client over a socketpair: Content-Length framed JSON-RPC,
// just enough JSON to read ty's pull-diagnostics answers.

namespace {

// A parsed JSON value (objects keep their member order).
struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  // The member `key` of an object, or nullptr.
  const Json* Get(std::string_view key) const {
    for (const auto& [name, value] : members) {
      if (name == key) return &value;
    }
    return nullptr;
  }
  std::string StringOr(std::string_view key, std::string fallback) const {
    const Json* v = Get(key);
    return v && v->kind == Kind::kString ? v->text : fallback;
  }
  int IntOr(std::string_view key, int fallback) const {
    const Json* v = Get(key);
    return v && v->kind == Kind::kNumber ? static_cast<int>(v->number) : fallback;
  }
};

void AppendUtf8(std::string& out, unsigned code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

// Recursive descent over one JSON text; errors are values.
class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  StatusOr<Json> ParseDocument() {
    Json value;
    if (!ParseValue(value, 0)) return CorruptError("ty server sent malformed JSON");
    SkipSpace();
    if (at_ != text_.size()) return CorruptError("ty server sent trailing bytes after JSON");
    return value;
  }

 private:
  void SkipSpace() {
    while (at_ < text_.size() && std::strchr(" \t\r\n", text_[at_]) != nullptr) ++at_;
  }
  bool Literal(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }
  bool ParseValue(Json& out, int depth) {
    if (depth > 64) return false;
    SkipSpace();
    if (at_ >= text_.size()) return false;
    char c = text_[at_];
    if (c == '{') return ParseObject(out, depth);
    if (c == '[') return ParseArray(out, depth);
    if (c == '"') {
      out.kind = Json::Kind::kString;
      return ParseString(out.text);
    }
    if (Literal("null")) return true;
    if (Literal("true") || Literal("false")) {
      out.kind = Json::Kind::kBool;
      out.boolean = text_[at_ - 1] == 'e' && text_[at_ - 2] == 'u';
      return true;
    }
    return ParseNumber(out);
  }
  bool ParseNumber(Json& out) {
    std::string digits;
    while (at_ < text_.size() && std::strchr("+-0123456789.eE", text_[at_]) != nullptr) {
      digits += text_[at_++];
    }
    if (digits.empty()) return false;
    char* end = nullptr;
    out.kind = Json::Kind::kNumber;
    out.number = std::strtod(digits.c_str(), &end);
    return end == digits.c_str() + digits.size();
  }
  bool ParseHex4(unsigned& code) {
    if (at_ + 4 > text_.size()) return false;
    code = 0;
    for (int i = 0; i < 4; ++i) {
      char h = text_[at_++];
      code <<= 4;
      if (h >= '0' && h <= '9') code |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f') code |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') code |= static_cast<unsigned>(h - 'A' + 10);
      else return false;
    }
    return true;
  }
  bool ParseEscape(std::string& out) {
    char e = text_[at_++];
    switch (e) {
      case '"': case '\\': case '/': out += e; return true;
      case 'b': out += '\b'; return true;
      case 'f': out += '\f'; return true;
      case 'n': out += '\n'; return true;
      case 'r': out += '\r'; return true;
      case 't': out += '\t'; return true;
      case 'u': break;
      default: return false;
    }
    unsigned code = 0;
    if (!ParseHex4(code)) return false;
    if (code >= 0xD800 && code < 0xDC00 && Literal("\\u")) {
      unsigned low = 0;
      if (!ParseHex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    AppendUtf8(out, code);
    return true;
  }
  bool ParseString(std::string& out) {
    ++at_;  // the opening quote
    while (at_ < text_.size()) {
      char c = text_[at_++];
      if (c == '"') return true;
      if (c != '\\') {
        out += c;
      } else if (at_ >= text_.size() || !ParseEscape(out)) {
        return false;
      }
    }
    return false;
  }
  bool ParseArray(Json& out, int depth) {
    out.kind = Json::Kind::kArray;
    ++at_;
    SkipSpace();
    if (Literal("]")) return true;
    while (true) {
      out.items.emplace_back();
      if (!ParseValue(out.items.back(), depth + 1)) return false;
      SkipSpace();
      if (Literal("]")) return true;
      if (!Literal(",")) return false;
    }
  }
  bool ParseObject(Json& out, int depth) {
    out.kind = Json::Kind::kObject;
    ++at_;
    SkipSpace();
    if (Literal("}")) return true;
    while (true) {
      SkipSpace();
      std::string key;
      if (at_ >= text_.size() || text_[at_] != '"' || !ParseString(key)) return false;
      SkipSpace();
      if (!Literal(":")) return false;
      out.members.emplace_back(std::move(key), Json{});
      if (!ParseValue(out.members.back().second, depth + 1)) return false;
      SkipSpace();
      if (Literal("}")) return true;
      if (!Literal(",")) return false;
    }
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

// `text` as a JSON string literal.
std::string JsonQuote(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
          out += buffer;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// `text` as a TOML basic string: JSON's escapes are valid TOML escapes.
std::string TomlQuote(std::string_view text) { return JsonQuote(text); }

std::string FileUri(const std::string& path) {
  std::string out = "file://";
  for (unsigned char c : path) {
    if (std::isalnum(c) || std::strchr("/-._~", c) != nullptr) {
      out += static_cast<char>(c);
    } else {
      char buffer[4];
      std::snprintf(buffer, sizeof buffer, "%%%02X", c);
      out += buffer;
    }
  }
  return out;
}

std::string PathOfUri(const std::string& uri) {
  if (!StartsWith(uri, "file://")) return uri;
  std::string out;
  for (std::size_t i = 7; i < uri.size(); ++i) {
    if (uri[i] == '%' && i + 2 < uri.size()) {
      out += static_cast<char>(std::strtol(uri.substr(i + 1, 2).c_str(), nullptr, 16));
      i += 2;
    } else {
      out += uri[i];
    }
  }
  return out;
}

// One pull-diagnostics item as a RawDiagnostic (positions made 1-based).
RawDiagnostic FromLspItem(const Json& item, const std::string& file) {
  RawDiagnostic d;
  d.rule = item.StringOr("code", "");
  d.message = item.StringOr("message", "");
  d.file = file;
  if (const Json* range = item.Get("range")) {
    if (const Json* start = range->Get("start")) {
      d.line = start->IntOr("line", -1) + 1;
      d.column = start->IntOr("character", -1) + 1;
    }
  }
  if (const Json* related = item.Get("relatedInformation")) {
    for (const Json& info : related->items) {
      if (const Json* location = info.Get("location")) {
        d.related_files.push_back(PathOfUri(location->StringOr("uri", "")));
      }
    }
  }
  return d;
}

// The settings a running server was started with; a change restarts it.
std::string ServerKey(const std::string& ty, const TypeCheckRequest& request) {
  std::string key = ty + '\n' + request.python_executable;
  for (const auto& dir : request.python_path) key += '\n' + dir;
  return key;
}

// ty.toml for the server's workspace: what TyArgv passes on the command line.
std::string WorkspaceConfig(const TypeCheckRequest& request) {
  std::string paths;
  for (const auto& dir : SearchDirs(request)) paths += (paths.empty() ? "" : ", ") + TomlQuote(dir);
  std::string out = "[environment]\nextra-paths = [" + paths + "]\n";
  if (!request.python_executable.empty()) {
    out += "python = " + TomlQuote(request.python_executable) + "\n";
  }
  return out;
}

}  // namespace

struct TyServer::Impl {
  std::timed_mutex mutex;
  pid_t owner = getpid();
  // The running server (child == nullptr: none).
  std::unique_ptr<ChildGroup> child;
  std::unique_ptr<TempProject> workspace;
  int channel = -1;  // our end of the socketpair: ty's stdin and stdout
  std::string key;
  std::string inbox;  // bytes read, not yet a whole message
  long next_id = 1;
  int version = 0;
  // Launch()ed: the id of the unanswered `initialize`; -1 when it could not
  // even be sent (the next FinishInitialize fails).
  long pending_initialize = 0;

  ~Impl() {
    if (getpid() != owner) {  // a forked copy: the server is the parent's
      if (child) child->Disown();
      if (workspace) workspace->Disown();
    }
    Stop();
  }

  std::string CellPath() const { return workspace ? workspace->PathOf(kCellFile) : ""; }

  void Stop() {
    child.reset();  // kills the group, reaps
    if (channel >= 0) close(channel);
    channel = -1;
    workspace.reset();
    key.clear();
    inbox.clear();
    version = 0;
    pending_initialize = 0;
  }

  Status Start(const std::string& ty, const TypeCheckRequest& request,
               Clock::time_point deadline) {
    DOLSOT_RETURN_IF_ERROR(Launch(ty, request, deadline));
    return FinishInitialize(deadline);
  }

  // Spawns the server and sends `initialize`, without waiting for its answer.
  Status Launch(const std::string& ty, const TypeCheckRequest& request,
                Clock::time_point deadline) {
    Stop();
    auto project = TempProject::Create();
    if (!project.ok()) return project.status();
    workspace = std::move(*project);
    DOLSOT_RETURN_IF_ERROR(workspace->Write("ty.toml", WorkspaceConfig(request)));
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      return IoError("socketpair: " + std::string(std::strerror(errno)));
    }
    StatusOr<pid_t> pid = Spawn({ty, "server"}, pair[1], pair[1], -1);
    close(pair[1]);
    channel = pair[0];
    if (!pid.ok()) return pid.status();
    child = std::make_unique<ChildGroup>(*pid);
    fcntl(channel, F_SETFL, fcntl(channel, F_GETFL) | O_NONBLOCK);
    key = ServerKey(ty, request);
    Status sent = SendInitialize(deadline);
    if (!sent.ok()) pending_initialize = -1;
    return sent;
  }

  Status SendInitialize(Clock::time_point deadline) {
    std::string root = FileUri(workspace->dir());
    std::string params =
        "{\"processId\":" + std::to_string(getpid()) + ",\"rootUri\":" + JsonQuote(root) +
        ",\"workspaceFolders\":[{\"uri\":" + JsonQuote(root) + ",\"name\":\"dolsot\"}]" +
        ",\"capabilities\":{\"general\":{\"positionEncodings\":[\"utf-32\",\"utf-16\"]}," +
        "\"textDocument\":{\"diagnostic\":{},\"publishDiagnostics\":{\"relatedInformation\":true}}}}";
    StatusOr<long> id = Request("initialize", params, deadline);
    if (!id.ok()) return id.status();
    pending_initialize = *id;
    return Status::Ok();
  }

  // Waits for the answer to `initialize` and completes the handshake.
  Status FinishInitialize(Clock::time_point deadline) {
    if (pending_initialize == 0) return Status::Ok();
    if (pending_initialize < 0) return Status(ErrorCode::kUnavailable, "ty server did not start");
    StatusOr<Json> reply = AwaitReply(pending_initialize, "initialize", deadline);
    if (!reply.ok()) return reply.status();
    pending_initialize = 0;
    return Notify("initialized", "{}", deadline);
  }

  Status Send(const std::string& body, Clock::time_point deadline) {
    std::string frame = "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    std::size_t sent = 0;
    while (sent < frame.size()) {
      ssize_t n = send(channel, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        return Status(ErrorCode::kUnavailable, "ty server is gone: " + std::string(std::strerror(errno)));
      }
      DOLSOT_RETURN_IF_ERROR(WaitFor(POLLOUT, deadline));
    }
    return Status::Ok();
  }

  Status WaitFor(short events, Clock::time_point deadline) {
    pollfd fd{channel, events, 0};
    while (true) {
      int wait_ms = MillisLeft(deadline);
      if (wait_ms == 0) return Status(ErrorCode::kTimeout, "ty server did not answer before the cell's deadline");
      int ready = poll(&fd, 1, wait_ms);
      if (ready > 0) return Status::Ok();
      if (ready < 0 && errno != EINTR) return IoError("poll: " + std::string(std::strerror(errno)));
    }
  }

  // One whole message from the server.
  StatusOr<Json> Receive(Clock::time_point deadline) {
    while (true) {
      std::size_t header_end = inbox.find("\r\n\r\n");
      if (header_end != std::string::npos) {
        std::size_t length = ContentLength(inbox.substr(0, header_end));
        if (length == std::string::npos) return CorruptError("ty server sent a frame without Content-Length");
        std::size_t body_start = header_end + 4;
        if (inbox.size() >= body_start + length) {
          std::string body = inbox.substr(body_start, length);
          inbox.erase(0, body_start + length);
          return JsonParser(body).ParseDocument();
        }
      }
      if (inbox.size() > kMaxTyOutput) return CorruptError("ty server sent an oversized message");
      char buffer[65536];
      ssize_t n = recv(channel, buffer, sizeof buffer, 0);
      if (n > 0) {
        inbox.append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0) {
        return Status(ErrorCode::kUnavailable, "ty server exited");
      } else if (errno == EAGAIN || errno == EINTR) {
        DOLSOT_RETURN_IF_ERROR(WaitFor(POLLIN, deadline));
      } else {
        return IoError("reading from ty server: " + std::string(std::strerror(errno)));
      }
    }
  }

  static std::size_t ContentLength(const std::string& headers) {
    std::istringstream in(headers);
    for (std::string line; std::getline(in, line);) {
      std::string lower;
      for (char c : line) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (StartsWith(lower, "content-length:")) {
        return static_cast<std::size_t>(std::strtoull(line.c_str() + 15, nullptr, 10));
      }
    }
    return std::string::npos;
  }

  Status Notify(const std::string& method, const std::string& params, Clock::time_point deadline) {
    return Send("{\"jsonrpc\":\"2.0\",\"method\":" + JsonQuote(method) + ",\"params\":" + params + "}",
                deadline);
  }

  // Sends a request and returns its result (AwaitReply).
  StatusOr<Json> Call(const std::string& method, const std::string& params,
                      Clock::time_point deadline) {
    StatusOr<long> id = Request(method, params, deadline);
    if (!id.ok()) return id.status();
    return AwaitReply(*id, method, deadline);
  }

  // Sends a request; returns its id.
  StatusOr<long> Request(const std::string& method, const std::string& params,
                         Clock::time_point deadline) {
    long id = next_id++;
    DOLSOT_RETURN_IF_ERROR(Send("{\"jsonrpc\":\"2.0\",\"id\":" + std::to_string(id) +
                                    ",\"method\":" + JsonQuote(method) + ",\"params\":" + params + "}",
                                deadline));
    return id;
  }

  // The result of request `id`, answering (with null) any request the server
  // makes meanwhile and skipping its notifications.
  StatusOr<Json> AwaitReply(long id, const std::string& method, Clock::time_point deadline) {
    while (true) {
      StatusOr<Json> message = Receive(deadline);
      if (!message.ok()) return message.status();
      const Json* message_id = message->Get("id");
      if (message->Get("method") != nullptr) {
        if (message_id == nullptr) continue;  // a notification (logs, progress)
        std::string raw_id = message_id->kind == Json::Kind::kString
                                 ? JsonQuote(message_id->text)
                                 : std::to_string(static_cast<long>(message_id->number));
        DOLSOT_RETURN_IF_ERROR(
            Send("{\"jsonrpc\":\"2.0\",\"id\":" + raw_id + ",\"result\":null}", deadline));
        continue;
      }
      if (message_id == nullptr || message_id->kind != Json::Kind::kNumber ||
          static_cast<long>(message_id->number) != id) {
        continue;
      }
      if (const Json* error = message->Get("error")) {
        return InternalError("ty server refused " + method + ": " + error->StringOr("message", "?"));
      }
      const Json* result = message->Get("result");
      return result ? *result : Json{};
    }
  }

  // Sends the new cell text and pulls its diagnostics.
  StatusOr<std::vector<RawDiagnostic>> Diagnose(const std::string& source,
                                                Clock::time_point deadline) {
    std::string uri = JsonQuote(FileUri(CellPath()));
    Status sent = version == 0
        ? Notify("textDocument/didOpen",
                 "{\"textDocument\":{\"uri\":" + uri + ",\"languageId\":\"python\",\"version\":1,"
                 "\"text\":" + JsonQuote(source) + "}}", deadline)
        : Notify("textDocument/didChange",
                 "{\"textDocument\":{\"uri\":" + uri + ",\"version\":" + std::to_string(version + 1) +
                 "},\"contentChanges\":[{\"text\":" + JsonQuote(source) + "}]}", deadline);
    DOLSOT_RETURN_IF_ERROR(sent);
    ++version;
    StatusOr<Json> report = Call("textDocument/diagnostic", "{\"textDocument\":{\"uri\":" + uri + "}}",
                                 deadline);
    if (!report.ok()) return report.status();
    const Json* items = report->Get("items");
    if (items == nullptr || items->kind != Json::Kind::kArray) {
      return CorruptError("ty server's diagnostic report has no items");
    }
    std::vector<RawDiagnostic> out;
    for (const Json& item : items->items) out.push_back(FromLspItem(item, CellPath()));
    return out;
  }
};

TyServer::TyServer() : impl_(std::make_unique<Impl>()) {}
TyServer::~TyServer() = default;

TypeCheckOutcome TyServer::Check(const TypeCheckRequest& request) {
  if (getpid() != impl_->owner) return TypeCheckCell(request);  // a forked child
  Clock::time_point deadline = EffectiveDeadline(request.deadline);
  if (auto skip = SkipReason(request, deadline)) return *skip;
  StatusOr<std::string> ty = ResolveBinary(request.ty_bin);
  if (!ty.ok()) return FailOpen(ty.status().message());
  std::unique_lock<std::timed_mutex> lock(impl_->mutex, std::defer_lock);
  if (!lock.try_lock_until(deadline)) {
    return FailOpen("ty server busy with other cells past this cell's deadline");
  }
  if (impl_->child == nullptr || impl_->key != ServerKey(*ty, request)) {
    Status started = impl_->Start(*ty, request, deadline);
    if (!started.ok()) {
      impl_->Stop();
      return FailOpen("ty server: " + started.message());
    }
  } else if (impl_->pending_initialize != 0 && !impl_->FinishInitialize(deadline).ok()) {
    // The prefetched server failed: start it once more, as without Prefetch.
    Status started = impl_->Start(*ty, request, deadline);
    if (!started.ok()) {
      impl_->Stop();
      return FailOpen("ty server: " + started.message());
    }
  }
  Prelude prelude = BuildPrelude(request);
  auto raw = impl_->Diagnose(CheckedSource(prelude, request.code), deadline);
  if (!raw.ok()) {
    impl_->Stop();  // the next check starts a fresh server
    return FailOpen("ty server: " + raw.status().message());
  }
  return Collect(*raw, request, prelude, impl_->CellPath());
}

void TyServer::Prefetch(const TypeCheckRequest& request) {
  if (getpid() != impl_->owner) return;
  Clock::time_point deadline = EffectiveDeadline(request.deadline);
  if (SkipReason(request, deadline)) return;
  StatusOr<std::string> ty = ResolveBinary(request.ty_bin);
  if (!ty.ok()) return;  // Check says why
  std::unique_lock<std::timed_mutex> lock(impl_->mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;  // a check is running: it keeps the server warm
  if (impl_->child != nullptr && impl_->key == ServerKey(*ty, request)) return;
  // A server that failed stays until the next Check, which starts it once more.
  (void)impl_->Launch(*ty, request, deadline);
}

}  // namespace dolsot
