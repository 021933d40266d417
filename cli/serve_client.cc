// Connecting to, starting and talking to the server.
#include "cli/serve_client.h"

#include <fcntl.h>
#include <poll.h>
#include <linux/close_range.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cli/interrupt.h"
#include "cli/sandbox_options.h"
#include "cli/serve_paths.h"
#include "cli/serve_protocol.h"
#include "cli/worker_locator.h"
#include "core/exit_codes.h"
#include "core/unique_fd.h"

extern char** environ;

namespace dolsot::cli {
namespace {

using Clock = std::chrono::steady_clock;

// A started server says it listens within this (it starts no worker).
constexpr auto kStartWait = std::chrono::seconds(30);
// Beyond the cell's timeout: a worker's start, a session's restore, a
// checkpoint, a call queued behind another on the same session.
constexpr double kReplyMarginSeconds = 60;
constexpr auto kStopWait = std::chrono::seconds(120);

enum class Connected { kYes, kNoServer, kStale };

// The credentials of the process serving `fd` (SO_PEERCRED), if readable.
std::optional<ucred> PeerOf(int fd) {
  ucred peer{};
  socklen_t length = sizeof peer;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) return std::nullopt;
  return peer;
}

// Whether the process `pid` has exited or is exiting. Its main thread a
// zombie while other threads still exit counts: those threads hold the
// process's files (its listening socket among them) until the last one is
// gone, and a pidfd only turns readable then. False when it cannot tell.
bool ProcessExited(pid_t pid) {
  if (pid <= 0) return false;
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd) return errno == ESRCH;
  pollfd p{pidfd.get(), POLLIN, 0};
  if (::poll(&p, 1, 0) == 1) return true;
  // The pidfd pins the pid: the stat read now is this process's.
  char stat[512];
  UniqueFd file(::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC));
  if (!file) return errno == ENOENT || errno == ESRCH;
  const ssize_t n = ::read(file.get(), stat, sizeof stat - 1);
  if (n <= 0) return n == 0 || errno == ESRCH;
  stat[n] = '\0';
  const char* end = std::strrchr(stat, ')');  // after the name, which may hold anything
  return end != nullptr && end[1] == ' ' && (end[2] == 'Z' || end[2] == 'X');
}

// Connects to `socket`; kStale when a socket file is there but nobody
// listens (a server that was killed), kNoServer when there is none.
StatusOr<Connected> Connect(const std::string& socket, UniqueFd& fd) {
  fd = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return IoError(std::string("socket: ") + std::strerror(errno));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket.size() >= sizeof(address.sun_path)) return InvalidArgument("socket path too long");
  std::memcpy(address.sun_path, socket.c_str(), socket.size() + 1);
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int error = errno;
    fd.Reset();
    if (error == ENOENT) return Connected::kNoServer;
    if (error == ECONNREFUSED) return Connected::kStale;
    return Status(ErrorCode::kUnavailable, "cannot connect to " + socket + ": " + std::strerror(error));
  }
  std::optional<ucred> peer = PeerOf(fd.get());
  if (!peer || peer->uid != ::getuid()) {
    fd.Reset();
    return Status(ErrorCode::kPermission,
                  socket + " is served by uid " + (peer ? std::to_string(peer->uid) : "unknown") +
                      ", not by us; refusing it");
  }
  // A server killed a moment ago keeps its listening socket until its last
  // thread has exited, after its main thread is a zombie: the connect
  // succeeds, and nobody will ever answer. Its listener (SO_PEERCRED names
  // it) is exiting: stale, as if refused.
  if (ProcessExited(peer->pid)) {
    fd.Reset();
    return Connected::kStale;
  }
  return Connected::kYes;
}

// Spawns `dolsot serve` detached (setsid, double fork: our child exits at
// once and is reaped here; stdin and stdout /dev/null, stderr the log) and
// waits until it listens. The start lock is held by the caller.
Status SpawnServer(const ServePaths& paths) {
  const std::string exe = CurrentExecutablePath();
  if (exe.empty()) return Status(ErrorCode::kUnavailable, "cannot find this program (/proc/self/exe)");
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) return IoError(std::string("pipe: ") + std::strerror(errno));
  UniqueFd ready_read(ready[0]), ready_write(ready[1]);
  // Everything the child needs, made before fork (only async-signal-safe
  // calls after it).
  const std::string ready_arg = std::to_string(ready_write.get());
  std::vector<std::string> args = {"dolsot", "serve", "--ready-fd", ready_arg};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "DOLSOT_CACHE_DIR=", 17) != 0) env_strings.emplace_back(*e);
  }
  env_strings.push_back("DOLSOT_CACHE_DIR=" + paths.cache_dir);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  UniqueFd log(::open(paths.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
  UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!log || !null) return IoError("cannot open " + paths.log + ": " + std::strerror(errno));

  pid_t child = ::fork();
  if (child < 0) return IoError(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    ::setsid();
    if (::fork() != 0) ::_exit(0);
    ::dup2(null.get(), 0);
    ::dup2(null.get(), 1);
    ::dup2(log.get(), 2);
    // Nothing of the caller's stays open in the server (a pipe the caller's
    // own caller waits on would never see EOF): every fd from 3 up closes
    // on exec but the readiness pipe.
    if (::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) != 0) {
      for (int fd = 3; fd < 4096; ++fd) {
        if (fd != ready_write.get()) ::close(fd);
      }
    }
    ::fcntl(ready_write.get(), F_SETFD, 0);  // this one survives exec
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    if (::chdir("/") != 0) ::_exit(127);
    ::execve(exe.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  ready_write.Reset();
  std::string answer;
  const auto deadline = Clock::now() + kStartWait;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Status(ErrorCode::kTimeout, "the server did not start in time");
    pollfd p{ready_read.get(), POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char buffer[64];
    ssize_t got = ::read(ready_read.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    answer.append(buffer, static_cast<std::size_t>(got));
  }
  if (answer == "ready\n" || answer == "busy\n") return Status::Ok();
  return Status(ErrorCode::kUnavailable, "the server did not start (see " + paths.log + ")");
}

// Stops a server that speaks another protocol version (an upgrade or a
// downgrade left it running), so this release's can start: it cannot read
// our stop request, so it gets the signal its own `serve --stop` handling
// shares (SIGTERM: every session checkpointed, then exit). Through a pidfd
// taken while `connection` still holds it, so a reused pid is never hit;
// SIGKILL when it does not exit within kStopWait (its sessions then are at
// their last checkpoint, as after any crash).
Status StopOtherVersion(int connection) {
  std::optional<ucred> peer = PeerOf(connection);  // our uid: Connect checked
  const pid_t pid = peer ? peer->pid : -1;
  if (pid <= 0) return Status(ErrorCode::kUnavailable, "cannot tell the server's pid");
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd) {
    if (errno == ESRCH) return Status::Ok();  // gone already
    return IoError(std::string("pidfd_open: ") + std::strerror(errno));
  }
  auto signal = [&](int sig) {
    return ::syscall(SYS_pidfd_send_signal, pidfd.get(), sig, nullptr, 0) == 0 || errno == ESRCH;
  };
  if (!signal(SIGTERM)) return IoError(std::string("cannot signal the server: ") + std::strerror(errno));
  auto exited = [&](Clock::time_point deadline) {
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      pollfd p{pidfd.get(), POLLIN, 0};
      int n = ::poll(&p, 1, static_cast<int>(left.count()));
      if (n > 0) return true;
      if (n < 0 && errno != EINTR) return false;
    }
  };
  if (exited(Clock::now() + kStopWait)) return Status::Ok();
  signal(SIGKILL);
  if (exited(Clock::now() + std::chrono::seconds(5))) return Status::Ok();
  return Status(ErrorCode::kTimeout, "the server of another version did not exit");
}

std::string OtherVersionNote(const Status& status) {
  return "the running dolsot server is of another dolsot release (" + status.message() + ")";
}

// Connects to the server, starting one when none listens (unless `start`
// is false: then an invalid fd). `restarted` is set when a server had been
// there and was gone.
StatusOr<UniqueFd> ConnectOrStart(const ServePaths& paths, bool start, bool& restarted) {
  UniqueFd fd;
  auto connected = Connect(paths.socket, fd);
  if (!connected.ok()) return connected.status();
  if (*connected == Connected::kYes || !start) return fd;
  restarted = *connected == Connected::kStale;
  // One starter at a time; the next one finds the server listening.
  UniqueFd start_lock(::open(paths.start_lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!start_lock) return IoError("cannot open " + paths.start_lock + ": " + std::strerror(errno));
  while (::flock(start_lock.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return IoError(std::string("flock: ") + std::strerror(errno));
  }
  connected = Connect(paths.socket, fd);
  if (!connected.ok()) return connected.status();
  if (*connected == Connected::kYes) return fd;
  DOLSOT_RETURN_IF_ERROR(SpawnServer(paths));
  connected = Connect(paths.socket, fd);
  if (!connected.ok()) return connected.status();
  if (*connected != Connected::kYes) {
    return Status(ErrorCode::kUnavailable, "the server started but does not listen (see " + paths.log + ")");
  }
  return fd;
}

StatusOr<ServePaths> PathsForThisCall() {
  const EnvLookup env = ProcessEnvironment();
  auto cache_dir = CanonicalCacheDir(env);
  if (!cache_dir.ok()) return cache_dir.status();
  return ResolveServePaths(*cache_dir, env);
}

std::string CurrentDirectory() {
  std::string buffer(4096, '\0');
  if (::getcwd(buffer.data(), buffer.size()) == nullptr) return "";
  buffer.resize(std::strlen(buffer.c_str()));
  return buffer;
}

// Seconds the client waits for the answer to a run.
double ReplyWaitSeconds(const RunArgs& run) {
  double timeout = kDefaultTimeoutSeconds;
  if (run.timeout_seconds) {
    timeout = *run.timeout_seconds;
  } else if (auto config = ResolveConfig(ConfigOverrides{}); config.ok()) {
    timeout = config->timeout_seconds;
  }
  return timeout + kReplyMarginSeconds;
}

// Sends `request` and reads the reply; Ctrl-C / SIGTERM during a run send
// an interrupt frame. A run's "chunk" replies (its stdout as it comes) go
// to `chunks` as they arrive, ahead of the reply.
StatusOr<ServeReply> Exchange(int fd, const ServeRequest& request, double wait_seconds,
                              std::ostream* chunks = nullptr) {
  DOLSOT_RETURN_IF_ERROR(WriteFrame(fd, EncodeRequest(request), kMaxRequestFrame));
  bool interrupt_sent = false;
  auto wait = [&]() -> Status {
    if (InterruptRequested() && !interrupt_sent) {
      interrupt_sent = true;
      ServeRequest interrupt;
      interrupt.type = RequestType::kInterrupt;
      (void)WriteFrame(fd, EncodeRequest(interrupt), kMaxRequestFrame);
    }
    return Status::Ok();
  };
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(wait_seconds));
  StatusOr<ServeReply> reply = Status(ErrorCode::kInternal, "unset");
  for (;;) {
    // Also between frames: while output streams, chunks keep coming and the
    // read never waits long enough to call `wait` (a Ctrl-C would be lost).
    (void)wait();
    auto frame = ReadFrame(fd, kMaxResponseFrame, deadline, wait);
    if (!frame.ok()) return frame.status();
    reply = DecodeReply(*frame);
    if (!reply.ok()) return reply.status();
    if (reply->type != ReplyType::kChunk) break;
    if (chunks != nullptr) {
      chunks->write(reply->out.data(), static_cast<std::streamsize>(reply->out.size()));
      chunks->flush();
    }
  }
  if (reply->type == ReplyType::kError) {
    return Status(ErrorCode::kInternal, "the dolsot server refused the request: " + reply->message);
  }
  return reply;
}

// A request to the running server, if one runs (no start): nullopt when none.
StatusOr<std::optional<ServeReply>> AskRunningServer(const ServePaths& paths,
                                                     const ServeRequest& request, UniqueFd* keep) {
  UniqueFd fd;
  auto connected = Connect(paths.socket, fd);
  if (!connected.ok()) return connected.status();
  if (*connected != Connected::kYes) return std::optional<ServeReply>();
  auto reply = Exchange(fd.get(), request, std::chrono::duration<double>(kStopWait).count());
  // The connection is kept on failure too: a server of another version is
  // stopped through it (StopOtherVersion).
  if (keep) *keep = std::move(fd);
  if (!reply.ok()) return reply.status();
  return std::optional<ServeReply>(std::move(reply).value());
}

// The paths for `serve --stop` / `--status`, or nullopt after printing why not.
std::optional<ServePaths> PathsOrReport(std::ostream& err) {
  auto paths = PathsForThisCall();
  if (paths.ok()) return std::move(paths).value();
  err << "dolsot: error: " << paths.status().message() << '\n';
  return std::nullopt;
}

}  // namespace

std::optional<int> CallServer(const CommandLine& line, const CommandContext& context) {
  ServeRequest request;
  request.json = line.json;
  if (line.action == Action::kRun) {
    auto code = ReadRunCode(line.run, context);
    if (!code.ok()) return ReportError(context.err, code.status());
    request.type = RequestType::kRun;
    request.run = line.run;
    request.run.code = std::move(code).value();
    request.run.code_words.clear();
    // The Sandbox policy travels resolved (flags and DOLSOT_SANDBOX read
    // here, as direct mode reads them), so the server runs the cell under
    // exactly this policy, or not at all.
    auto policy = SandboxPolicyFromArgs(line.run.sandbox);
    if (!policy.ok()) return ReportError(context.err, policy.status());
    request.run.sandbox.resolved = true;
    request.run.sandbox.policy = std::move(policy).value();
  } else if (line.action == Action::kListSessions) {
    request.type = RequestType::kList;
  } else if (line.action == Action::kNames) {
    request.type = RequestType::kNames;
    request.target = line.names.session.value_or("");
  } else {
    request.type = RequestType::kReset;
    request.target = line.reset.target.value_or("");
  }
  request.cwd = CurrentDirectory();
  // A configuration the store refuses, a cwd that is gone: direct mode
  // reports it as it always does.
  if (request.cwd.empty() || request.cwd[0] != '/') return std::nullopt;
  auto paths = PathsForThisCall();
  if (!paths.ok()) {
    if (paths.status().code() == ErrorCode::kConfig || paths.status().code() == ErrorCode::kPermission) {
      return std::nullopt;
    }
    context.err << "dolsot: note: the dolsot server is unavailable (" << paths.status().message()
                << "); running directly\n";
    return std::nullopt;
  }
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) request.env.emplace_back(*e);

  const double wait_seconds = line.action == Action::kRun
                                  ? ReplyWaitSeconds(line.run)
                                  : std::chrono::duration<double>(kStopWait).count();
  StatusOr<ServeReply> reply = Status(ErrorCode::kInternal, "unset");
  for (int attempt = 0;; ++attempt) {
    bool restarted = false;
    // --list-sessions, --reset and --names use a server that runs (it holds
    // live sessions) but start none: the store is all there is then.
    auto fd = ConnectOrStart(*paths, line.action == Action::kRun, restarted);
    if (fd.ok() && !fd->valid()) return std::nullopt;
    if (!fd.ok()) {
      context.err << "dolsot: note: cannot start a dolsot server (" << fd.status().message()
                  << "); running directly\n";
      context.err.flush();
      return std::nullopt;
    }
    if (restarted && attempt == 0) {
      context.err << "dolsot: note: the dolsot server was gone; started a new one (sessions are at "
                     "their last checkpoint)\n";
    }
    {
      CellInProgress running;  // Ctrl-C / SIGTERM now interrupt the cell
      reply = Exchange(fd->get(), request, wait_seconds, &context.out);
    }
    if (attempt > 0 || reply.ok() || reply.status().code() != kOtherProtocolVersion) break;
    // A server of another release refused the request without acting on
    // it: replace it by this release's (a list or a reset then runs
    // directly: the store is all there is once it checkpointed and left).
    Status stopped = StopOtherVersion(fd->get());
    if (!stopped.ok()) {
      context.err << "dolsot: error: " << OtherVersionNote(reply.status())
                  << " and could not be stopped (" << stopped.message() << "); stop it with kill\n";
      context.err.flush();
      return kExitFailure;
    }
    context.err << "dolsot: note: " << OtherVersionNote(reply.status())
                << "; stopped it (its sessions are at their last checkpoint)"
                << (line.action == Action::kRun ? " and started this one" : "") << "\n";
    context.err.flush();
  }
  if (!reply.ok()) {
    const ErrorCode code = reply.status().code();
    if (code == ErrorCode::kUnavailable || code == ErrorCode::kCorrupt) {
      context.err << "dolsot: error: the dolsot server exited during the call; the session is at "
                     "its last checkpoint (the cell may have run)\n";
    } else if (code == ErrorCode::kTimeout) {
      context.err << "dolsot: error: the dolsot server did not answer in time; gave up (the "
                     "session is at its last checkpoint; see " << paths->log << ")\n";
    } else {
      context.err << "dolsot: error: " << reply.status().message() << '\n';
    }
    context.err.flush();
    return kExitFailure;
  }
  context.out.write(reply->out.data(), static_cast<std::streamsize>(reply->out.size()));
  context.out.flush();
  context.err.write(reply->err.data(), static_cast<std::streamsize>(reply->err.size()));
  context.err.flush();
  return reply->exit_code;
}

void ReleaseFromServer(const std::string& target, std::ostream& err) {
  auto paths = PathsForThisCall();
  if (!paths.ok()) return;  // direct mode reports a bad configuration
  ServeRequest request;
  request.type = RequestType::kRelease;
  request.target = target;
  UniqueFd fd;
  auto reply = AskRunningServer(*paths, request, &fd);
  if (!reply.ok() && reply.status().code() == kOtherProtocolVersion && fd.valid()) {
    // It cannot release one session for us: stopping it releases them all.
    Status stopped = StopOtherVersion(fd.get());
    if (stopped.ok()) return;
    reply = stopped;
  }
  if (!reply.ok()) {
    err << "dolsot: warning: could not ask the dolsot server to release '" << target
        << "': " << reply.status().message() << '\n';
  }
}

int StopServer(std::ostream& out, std::ostream& err, bool json) {
  auto paths = PathsOrReport(err);
  if (!paths) return kExitUsage;
  UniqueFd fd;
  ServeRequest stop;
  stop.type = RequestType::kStop;
  auto asked = AskRunningServer(*paths, stop, &fd);
  bool ran = false;
  if (!asked.ok() && asked.status().code() == kOtherProtocolVersion && fd.valid()) {
    Status stopped = StopOtherVersion(fd.get());
    if (!stopped.ok()) {
      err << "dolsot: error: " << OtherVersionNote(asked.status()) << " and could not be stopped ("
          << stopped.message() << ")\n";
      return kExitFailure;
    }
    ran = true;
  } else if (!asked.ok()) {
    err << "dolsot: error: " << asked.status().message() << '\n';
    return kExitFailure;
  } else if (asked->has_value()) {
    ran = true;
    // The server closes this connection last, after its lock: EOF means gone.
    auto frame = ReadFrame(fd.get(), kMaxResponseFrame, Clock::now() + kStopWait);
    if (frame.ok() || frame.status().code() == ErrorCode::kTimeout) {
      err << "dolsot: error: the dolsot server did not stop in time\n";
      return kExitFailure;
    }
  }
  if (json) {
    out << nlohmann::json{{"stopped", ran}, {"cache_dir", paths->cache_dir}}.dump() << '\n';
  } else {
    out << (ran ? "stopped the dolsot server for " : "no dolsot server runs for ")
        << paths->cache_dir << '\n';
  }
  return kExitOk;
}

int PrintServerStatus(std::ostream& out, std::ostream& err, bool json) {
  auto paths = PathsOrReport(err);
  if (!paths) return kExitUsage;
  ServeRequest request;
  request.type = RequestType::kStatus;
  auto asked = AskRunningServer(*paths, request, nullptr);
  if (!asked.ok()) {
    err << "dolsot: error: "
        << (asked.status().code() == kOtherProtocolVersion
                ? OtherVersionNote(asked.status()) + "; `dolsot serve --stop` stops it"
                : asked.status().message())
        << '\n';
    return kExitFailure;
  }
  std::optional<std::optional<ServeReply>> reply = std::move(asked).value();
  if (!reply->has_value()) {
    if (json) {
      out << nlohmann::json{{"running", false}, {"cache_dir", paths->cache_dir},
                            {"socket", paths->socket}}.dump() << '\n';
    } else {
      out << "no dolsot server runs for " << paths->cache_dir << '\n';
    }
    return kExitOk;
  }
  const ServeStatus& s = (*reply)->status;
  if (json) {
    nlohmann::ordered_json doc;
    doc["running"] = true;
    doc["pid"] = s.pid;
    doc["socket"] = s.socket;
    doc["cache_dir"] = s.cache_dir;
    doc["uptime_seconds"] = s.uptime_seconds;
    doc["live_sessions"] = s.live_sessions;
    doc["profiles"] = s.profiles;
    out << doc.dump() << '\n';
    return kExitOk;
  }
  std::string live;
  for (const auto& sid : s.live_sessions) live += (live.empty() ? "" : ", ") + sid;
  out << "pid: " << s.pid << "\nsocket: " << s.socket << "\ncache dir: " << s.cache_dir
      << "\nuptime: " << static_cast<long long>(s.uptime_seconds) << " s\nprofiles: " << s.profiles
      << "\nlive sessions: " << (live.empty() ? "none" : live) << '\n';
  return kExitOk;
}

}  // namespace dolsot::cli
