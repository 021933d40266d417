// CpythonOracleProcess: a `python -I -S` child answering where a cell's
// statements start, over a socketpair, one length-prefixed question at a time.
#include "sandbox/cpython_oracle_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <charconv>
#include <cstring>

#include "core/child_process.h"
#include "core/unique_fd.h"


namespace dolsot::sandbox {
namespace {

// The child: says "R" once it runs, then answers each question
// (8-byte little-endian length, the cell's UTF-8) with "O" or "E", an 8-byte
// length and the body: "line column\n" per statement (the walk of
// embedded/cpython_statements.cc: statement lists, and the bodies of except
// handlers and match cases), or CPython's "Type: message". -I ignores PYTHON*
// variables and the user's site directory, -S skips site: nothing but the
// standard library's ast runs, and no code of the cell.
constexpr const char* kScript = R"PY(
import ast, sys
i, o = sys.stdin.buffer, sys.stdout.buffer
def walk(statements, out, depth):
    if depth > 1000:
        raise RecursionError("statements nested too deeply")
    for s in statements:
        out.append((s.lineno, s.col_offset))
        for f in ("body", "orelse", "finalbody"):
            v = getattr(s, f, None)
            if isinstance(v, list):
                walk(v, out, depth + 1)
        for f in ("handlers", "cases"):
            v = getattr(s, f, None)
            if isinstance(v, list):
                for clause in v:
                    walk(clause.body, out, depth + 2)
o.write(b"R")
o.flush()
while True:
    head = i.read(8)
    if len(head) < 8:
        break
    source = i.read(int.from_bytes(head, "little"))
    try:
        tree = compile(source.decode("utf-8"), "<cell>", "exec", ast.PyCF_ONLY_AST)
        starts = []
        walk(tree.body, starts, 0)
        starts.sort()
        tag, body = b"O", "".join("%d %d\n" % s for s in starts).encode()
    except Exception as e:
        tag, body = b"E", ("%s: %s" % (type(e).__name__, e)).encode("utf-8", "replace")
    o.write(tag + len(body).to_bytes(8, "little") + body)
    o.flush()
)PY";

constexpr std::size_t kMaxAnswer = 64u << 20;  // "line col\n" per statement of an 8 MB cell fits

std::string ErrnoText() { return std::strerror(errno); }

enum class Wait { kReady, kTimedOut, kFailed };

Wait PollFor(int fd, short events, CpythonOracleProcess::Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - CpythonOracleProcess::Clock::now());
    if (left.count() <= 0) return Wait::kTimedOut;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return Wait::kFailed;
    if (rc > 0) return Wait::kReady;
  }
}

// Empty status: done. Otherwise why not.
std::optional<std::string> WriteAll(int fd, std::string_view data,
                                    CpythonOracleProcess::Clock::time_point deadline) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      Wait w = PollFor(fd, POLLOUT, deadline);
      if (w == Wait::kTimedOut) return "it did not take the cell in time";
      if (w == Wait::kFailed) return "poll: " + ErrnoText();
      continue;
    }
    return "it went away (" + ErrnoText() + ")";
  }
  return std::nullopt;
}

std::optional<std::string> ReadExact(int fd, char* out, std::size_t size,
                                     CpythonOracleProcess::Clock::time_point deadline) {
  while (size > 0) {
    ssize_t n = ::recv(fd, out, size, MSG_DONTWAIT);
    if (n > 0) {
      out += n;
      size -= static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) return "it exited";
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      Wait w = PollFor(fd, POLLIN, deadline);
      if (w == Wait::kTimedOut) return "it did not answer in time";
      if (w == Wait::kFailed) return "poll: " + ErrnoText();
      continue;
    }
    return "recv: " + ErrnoText();
  }
  return std::nullopt;
}

std::string LengthPrefix(std::uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

std::uint64_t ReadLength(const char* bytes) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  return n;
}

// "line col\n"... -> starts; false on anything else.
bool ParseStarts(std::string_view body, std::vector<StatementStart>& out) {
  while (!body.empty()) {
    std::size_t end = body.find('\n');
    if (end == std::string_view::npos) return false;
    std::string_view line = body.substr(0, end);
    body.remove_prefix(end + 1);
    std::size_t space = line.find(' ');
    if (space == std::string_view::npos) return false;
    StatementStart start;
    auto a = std::from_chars(line.data(), line.data() + space, start.line);
    auto b = std::from_chars(line.data() + space + 1, line.data() + line.size(), start.column);
    if (a.ec != std::errc() || a.ptr != line.data() + space || b.ec != std::errc() ||
        b.ptr != line.data() + line.size()) {
      return false;
    }
    out.push_back(start);
  }
  return true;
}

}  // namespace

class CpythonOracleProcess::Child {
 public:
  Child(ChildProcess process, UniqueFd channel)
      : process(std::move(process)), channel(std::move(channel)) {}
  ChildProcess process;  // its own process group; killed and reaped with this
  UniqueFd channel;      // host end; the child's stdin and stdout are the other end
  pid_t owner = ::getpid();
  bool ready = false;  // its "R" was read
};

CpythonOracleProcess::CpythonOracleProcess(std::string python, std::chrono::milliseconds deadline)
    : python_(std::move(python)), deadline_(deadline) {}

CpythonOracleProcess::~CpythonOracleProcess() {
  // In a forked copy of the host the child is the creator's: forget it.
  if (child_ && child_->owner != ::getpid()) {
    (void)child_->channel.Release();
    child_.release();  // NOLINT: intentionally leaked in the copy, owned by the creator
  }
}

int CpythonOracleProcess::pid() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return child_ ? child_->process.pid() : -1;
}

Status CpythonOracleProcess::Start() {
  std::lock_guard<std::mutex> lock(mutex_);
  return StartLocked();
}

Status CpythonOracleProcess::StartLocked() {
  if (child_ && child_->owner == ::getpid()) return Status::Ok();
  if (child_) {  // a forked copy: the creator's child is not ours to use
    (void)child_->channel.Release();
    child_.release();  // NOLINT: owned by the creator
  }
  if (python_.empty()) return Status(ErrorCode::kUnavailable, "no Python interpreter for the gate");
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return Status(ErrorCode::kUnavailable, "socketpair: " + ErrnoText());
  }
  UniqueFd host(pair[0]);
  UniqueFd child_end(pair[1]);
  StatusOr<pid_t> spawned =
      SpawnWithStdio({python_, "-I", "-S", "-c", kScript}, /*env=*/nullptr, child_end.get());
  child_end.Reset();
  if (!spawned.ok()) {
    return Status(ErrorCode::kUnavailable,
                  spawned.status().message() + " (the gate's statement check)");
  }
  pid_t pid = *spawned;
  child_ = std::make_unique<Child>(ChildProcess::Adopt(pid, ChildProcess::Group::kOwn),
                                   std::move(host));
  return Status::Ok();
}

// The child's "R", once: until then it may still be starting (its start
// overlaps the host's own work), or it never ran (exec failed).
Status CpythonOracleProcess::AwaitReadyLocked() {
  if (child_->ready) return Status::Ok();
  char ready = 0;
  auto failed = ReadExact(child_->channel.get(), &ready, 1, Clock::now() + deadline_);
  if (failed || ready != 'R') {
    child_.reset();
    return Status(ErrorCode::kUnavailable,
                  python_ + " did not start as the gate's statement check: " +
                      failed.value_or("it printed something else"));
  }
  child_->ready = true;
  return Status::Ok();
}

StatusOr<std::vector<StatementStart>> CpythonOracleProcess::StatementStarts(std::string_view code) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (Status started = StartLocked(); !started.ok()) return started;
  if (Status ready = AwaitReadyLocked(); !ready.ok()) return ready;
  StatusOr<std::vector<StatementStart>> answer = AskLocked(code);
  // A child that failed on this cell is not trusted with the next one.
  if (!answer.ok() && answer.status().code() != ErrorCode::kInvalidArgument) child_.reset();
  if (!answer.ok() && answer.status().code() == ErrorCode::kInternal) {
    return InvalidArgument(answer.status().message());  // refused, never let through
  }
  return answer;
}

StatusOr<std::vector<StatementStart>> CpythonOracleProcess::AskLocked(std::string_view code) {
  const Clock::time_point deadline = Clock::now() + deadline_;
  const int fd = child_->channel.get();
  auto broken = [&](const std::string& why) {
    return Status(ErrorCode::kInternal,
                  "CPython's parser (" + python_ + ") failed on the cell: " + why +
                      "; the cell cannot be checked");
  };
  if (auto failed = WriteAll(fd, LengthPrefix(code.size()), deadline)) return broken(*failed);
  if (auto failed = WriteAll(fd, code, deadline)) return broken(*failed);
  char head[9];
  if (auto failed = ReadExact(fd, head, sizeof head, deadline)) return broken(*failed);
  const std::uint64_t size = ReadLength(head + 1);
  if ((head[0] != 'O' && head[0] != 'E') || size > kMaxAnswer) return broken("a malformed answer");
  std::string body(static_cast<std::size_t>(size), '\0');
  if (auto failed = ReadExact(fd, body.data(), body.size(), deadline)) return broken(*failed);
  if (head[0] == 'E') return InvalidArgument(body);
  std::vector<StatementStart> starts;
  if (!ParseStarts(body, starts)) return broken("a malformed answer");
  return starts;
}

StatementOracle MakeCpythonProcessOracle(std::string python) {
  if (python.empty()) return {};
  auto process = std::make_shared<CpythonOracleProcess>(std::move(python));
  (void)process->Start();  // starts while the host goes on; errors come again at the first question
  return [process](std::string_view code) { return process->StatementStarts(code); };
}

}  // namespace dolsot::sandbox
