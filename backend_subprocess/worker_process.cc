// Spawning, greeting and stopping the worker process.
#include "backend_subprocess/worker_process.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "backend_subprocess/namespaced_pids.h"
#include "sandbox/sandbox_setup.h"

extern char** environ;

// Defined by installed_worker.cc in a host built against an installed dolsot
// (the exported targets compile it in); null otherwise.
extern "C" __attribute__((weak)) const char* dolsot_installed_worker();

namespace dolsot {
namespace {

using protocol::PayloadReader;
using protocol::PayloadWriter;
using protocol::Tag;

// At most 200 bytes of text from another process, every byte outside
// printable ASCII shown as '?'.
std::string PrintableExcerpt(std::string_view text) {
  constexpr std::size_t kMax = 200;
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < kMax; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  }
  if (text.size() > kMax) out += "...";
  return out.empty() ? "no message" : "\"" + out + "\"";
}

constexpr int kChildChannelFd = 3;
constexpr int kChildHostStderrFd = 4;
// How much of a dying worker's stderr its error message shows (the end).
constexpr std::size_t kStderrTailBytes = 4096;
// How long a worker that closed its channel gets to exit before it is killed.
constexpr auto kExitGrace = std::chrono::seconds(5);

bool IsExecutable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::string SelfDirectory() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  std::string path(buf, static_cast<std::size_t>(n));
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

// A close-on-exec copy of `fd` numbered 10 or more: a source the spawn's
// file actions cannot clobber while they dup2 onto 2, 3 and 4.
UniqueFd Lift(int fd) { return UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 10)); }

// The environment of the worker: ours (or `base` when given) without the
// worker's own variables, `extra_env`, then those variables. A sandboxed
// worker gets only the allow-list of that environment (and the variables its
// interpreter needs to start, which it drops once started), then the
// policy's.
bool PassedToWorker(const char* entry, const SandboxPolicy* sandbox) {
  if (sandbox == nullptr) return true;
  const char* eq = std::strchr(entry, '=');
  if (eq == nullptr) return false;
  std::string name(entry, static_cast<std::size_t>(eq - entry));
  return SandboxKeepsVariable(name) || name == "PYTHONPATH" || name == "PYTHONHOME";
}

std::vector<std::string> WorkerEnvironment(const std::vector<std::string>& extra_env,
                                           bool captures_stderr,
                                           const std::optional<std::vector<std::string>>& base,
                                           const SandboxPolicy* sandbox) {
  std::vector<std::string> out;
  std::string fd_var = std::string(kWorkerFdVariable) + "=";
  std::string stderr_var = std::string(kWorkerStderrFdVariable) + "=";
  auto keep = [&](const char* e) {
    if (std::strncmp(e, fd_var.c_str(), fd_var.size()) == 0) return;
    if (std::strncmp(e, stderr_var.c_str(), stderr_var.size()) == 0) return;
    if (!PassedToWorker(e, sandbox)) return;
    out.emplace_back(e);
  };
  if (base) {
    for (const auto& e : *base) keep(e.c_str());
  } else {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) keep(*e);
  }
  for (const auto& e : extra_env) out.push_back(e);
  if (sandbox != nullptr) {
    for (const auto& [name, value] : sandbox->env) out.push_back(name + "=" + value);
  }
  out.push_back(fd_var + std::to_string(kChildChannelFd));
  if (captures_stderr) out.push_back(stderr_var + std::to_string(kChildHostStderrFd));
  return out;
}

// Spawns the worker with `channel` as its fd 3 and, when `startup_stderr` is
// a file, that file as its fd 2 and the host's own stderr as its fd 4.
StatusOr<pid_t> Spawn(const std::vector<std::string>& command,
                      const std::vector<std::string>& extra_env, int channel_fd,
                      int startup_stderr, const WorkerPlacement& placement,
                      const SandboxPolicy* sandbox) {
  if (command.empty()) return InvalidArgument("the worker command is empty");
  UniqueFd channel = Lift(channel_fd);
  if (!channel) return IoError(std::string("fcntl: ") + std::strerror(errno));
  UniqueFd capture, host_stderr;
  if (startup_stderr >= 0) {
    capture = Lift(startup_stderr);
    host_stderr = Lift(2);  // none (fd 2 closed): no capture either
    if (!capture || !host_stderr) capture.Reset();
  }
  std::vector<std::string> env_strings =
      WorkerEnvironment(extra_env, capture.valid(), placement.base_environment, sandbox);
  std::vector<char*> envp, argv;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = command;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, channel.get(), kChildChannelFd);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (capture) {
    posix_spawn_file_actions_adddup2(&actions, capture.get(), 2);
    posix_spawn_file_actions_adddup2(&actions, host_stderr.get(), kChildHostStderrFd);
  }
  if (!placement.directory.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, placement.directory.c_str());
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGCHLD, SIGPIPE}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  // Its own process group: a Ctrl-C at the host's terminal does not reach it.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return Status(ErrorCode::kUnavailable,
                  "cannot start the worker '" + command[0] + "'" +
                      (placement.directory.empty() ? "" : " in " + placement.directory) + ": " +
                      std::strerror(rc));
  }
  return pid;
}

// The last kStderrTailBytes of `file` from its first whole line, every byte
// outside printable ASCII (but newlines and tabs) shown as '?', trailing
// blank lines dropped.
std::string StderrTail(int file) {
  struct stat st {};
  if (::fstat(file, &st) != 0 || st.st_size <= 0) return "";
  auto size = static_cast<std::size_t>(st.st_size);
  std::size_t from = size > kStderrTailBytes ? size - kStderrTailBytes : 0;
  std::string text(size - from, '\0');
  ssize_t got = ::pread(file, text.data(), text.size(), static_cast<off_t>(from));
  text.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  if (from > 0) {
    auto newline = text.find('\n');
    text = "[...]\n" + (newline == std::string::npos ? text : text.substr(newline + 1));
  }
  for (char& c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c != '\n' && c != '\t' && (u < 0x20 || u >= 0x7f)) c = '?';
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// Copies what the worker wrote to `file` during its start-up to our stderr,
// where it would have gone without the capture.
void ForwardToStderr(int file) {
  char buf[64 * 1024];
  off_t at = 0;
  for (;;) {
    ssize_t n = ::pread(file, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    at += n;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(2, buf + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return;
      done += w;
    }
  }
}

}  // namespace

std::string WorkerInterpreter(const std::string& worker_path, const std::string& built_with) {
  std::string::size_type slash = worker_path.rfind('/');
  if (slash != std::string::npos) {
    for (const char* name : {"python3", "python"}) {
      std::string candidate = worker_path.substr(0, slash + 1) + name;
      if (IsExecutable(candidate)) return candidate;
    }
  }
  if (!built_with.empty() && IsExecutable(built_with)) return built_with;
  return "";
}

std::vector<std::string> DefaultWorkerCommand() {
  std::vector<std::string> candidates;
  std::string self = SelfDirectory();
  if (!self.empty()) candidates.push_back(self + "/dolsot-worker");
  // A host built against an installed prefix: that prefix's worker, wherever
  // the prefix is now (installed_worker.cc; never in this build tree's own
  // programs, so it goes before them even when the host's build directory
  // lies inside this build tree).
  if (dolsot_installed_worker != nullptr) candidates.push_back(dolsot_installed_worker());
#if defined(DOLSOT_BUILD_TREE) && defined(DOLSOT_WORKER_BUILD_PATH)
  // A program of this build tree (a test, say) takes the worker built with
  // it: an installed one may be of another version (another protocol).
  char resolved[PATH_MAX];
  std::string tree = ::realpath(DOLSOT_BUILD_TREE, resolved) != nullptr ? resolved : DOLSOT_BUILD_TREE;
  tree += "/";
  if (!self.empty() && (self + "/").compare(0, tree.size(), tree) == 0) {
    candidates.push_back(DOLSOT_WORKER_BUILD_PATH);
  }
#endif
#ifdef DOLSOT_WORKER_INSTALL_PATH
  candidates.push_back(DOLSOT_WORKER_INSTALL_PATH);
#endif
#ifdef DOLSOT_WORKER_BUILD_PATH
  candidates.push_back(DOLSOT_WORKER_BUILD_PATH);
#endif
  for (const auto& c : candidates) {
    if (IsExecutable(c)) return {c};
  }
  return {"dolsot-worker"};  // left to PATH; a clear error if absent
}

StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Start(
    const std::vector<std::string>& command, const std::vector<std::string>& extra_env,
    const WorkerSettings& settings, protocol::Deadline deadline,
    const WorkerPlacement& placement) {
  auto pair = protocol::SocketPair();
  if (!pair.ok()) return pair.status();
  // Without a memory file the worker writes to our stderr from the start.
  UniqueFd startup_stderr(::memfd_create("dolsot-worker-stderr", MFD_CLOEXEC));
  const SandboxPolicy* sandbox = settings.sandbox ? &*settings.sandbox : nullptr;
  auto pid = Spawn(command, extra_env, pair->second.get(), startup_stderr.get(), placement, sandbox);
  if (!pid.ok()) return pid.status();
  pair->second.Reset();
  std::unique_ptr<WorkerProcess> worker(new WorkerProcess(
      std::move(pair->first), ChildProcess::Adopt(*pid, ChildProcess::Group::kOwn)));
  // While its interpreter starts, and before HELLO (it forks nothing
  // before HELLO): an error here is the worker's to retry and report.
  if (sandbox != nullptr) (void)PlaceInSandboxCgroup(*pid, sandbox->processes);
  Status sent = protocol::WriteFrame(worker->socket_.get(), Tag::kHello, EncodeHello(settings));
  auto reply = sent.ok() ? protocol::ReadFrame(worker->socket_.get(), deadline)
                         : StatusOr<protocol::Frame>(sent);
  std::string importing;  // "toolbox 'mt' (module 'mytools')" while one imports
  while (reply.ok() && reply->tag == Tag::kImporting) {
    PayloadReader r(reply->payload);
    std::string alias = r.Str();
    std::string module = r.Str();
    if (!r.Finish("IMPORTING").ok()) return CorruptError("the worker sent a malformed IMPORTING");
    importing = "toolbox '" + alias + "' (module '" + module + "')";
    reply = protocol::ReadFrame(worker->socket_.get(), deadline);
  }
  if (!reply.ok()) {
    Status failed = worker->StartFailure(command[0], reply.status(), startup_stderr);
    if (importing.empty()) return failed;
    // Out of time while a toolbox imported: still the cell's deadline.
    if (reply.status().code() == ErrorCode::kTimeout) {
      return Status(failed.code(), failed.message() + " (it was importing " + importing + ")");
    }
    // The worker died in a toolbox's import: the toolbox is at fault, as when
    // it raises (kInvalidToolbox), and named.
    return Status(ErrorCode::kInvalidToolbox,
                  importing + " did not import: " + failed.message());
  }
  if (reply->tag == Tag::kHelloError) {
    PayloadReader r(reply->payload);
    auto code = static_cast<ErrorCode>(r.U32());
    std::string message = r.Str();
    if (!r.Finish("HELLO_ERROR").ok()) {
      // Workers of protocol 1 sent a refused handshake as bare text: most
      // likely a stale dolsot-worker installed by an older build.
      return Status(ErrorCode::kUnavailable,
                    "the worker '" + command[0] + "' refused the handshake in another protocol (" +
                        PrintableExcerpt(reply->payload) +
                        "); is it a dolsot-worker of another dolsot version?");
    }
    return Status(code == ErrorCode::kInvalidToolbox ? code : ErrorCode::kUnavailable, message);
  }
  if (reply->tag != Tag::kHelloOk) {
    return CorruptError(std::string("the worker answered HELLO with ") + protocol::TagName(reply->tag));
  }
  if (settings.sandbox) {
    PayloadReader r(reply->payload);
    (void)r.U32();
    auto report = SandboxReport::Decode(r.Str());
    if (!r.Finish("HELLO_OK").ok() || !report.ok()) {
      return CorruptError("the worker's HELLO_OK carries no sandbox report");
    }
    worker->sandboxed_ = true;
    worker->sandbox_report_ = std::move(report).value();
  }
  if (startup_stderr) ForwardToStderr(startup_stderr.get());
  return worker;
}

Status WorkerProcess::StartFailure(const std::string& name, const Status& why,
                                   const UniqueFd& startup_stderr) {
  std::string what;
  if (why.code() == ErrorCode::kTimeout) {
    what = "did not answer before the deadline";
    process_.Kill();  // now, rather than after Stop's grace
    (void)process_.Wait();
  } else {
    // It closed its end: it is exiting, or has exited.
    auto status = process_.Wait(ChildProcess::Clock::now() + kExitGrace);
    if (status.ok()) {
      what = (WIFSIGNALED(*status) ? "was " : "") + DescribeWaitStatus(*status) +
             " before it answered";
    } else {
      what = "closed its channel before it answered (" + why.message() + ")";
    }
  }
  std::string message = "the worker '" + name + "' " + what;
  if (startup_stderr) {
    std::string tail = StderrTail(startup_stderr.get());
    message += tail.empty() ? "; it wrote nothing to stderr" : "; its stderr ended with:\n" + tail;
  }
  return Status(ErrorCode::kUnavailable, message);
}

WorkerProcess::~WorkerProcess() { Stop(); }

StatusOr<ProcessChannel> WorkerProcess::OpenSession(protocol::Deadline deadline) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (stopped_) return Status(ErrorCode::kUnavailable, "the worker is stopped");
  DOLSOT_RETURN_IF_ERROR(protocol::WriteFrame(socket_.get(), Tag::kOpen, {}));
  auto reply = protocol::ReadFrame(socket_.get(), deadline);
  // Out of descriptors here: the worker is fine and the stream in step (the
  // session it opened sees its socket closed and ends), so no new worker.
  if (!reply.ok() && protocol::DescriptorsDropped(reply.status())) return reply.status();
  if (!reply.ok()) {
    if (reply.status().code() == ErrorCode::kTimeout) {
      stopped_ = true;  // the stream is out of step now; never reuse it
    }
    return Status(ErrorCode::kUnavailable, "the worker did not open a session: " +
                                               reply.status().message());
  }
  PayloadReader r(reply->payload);
  auto pid = static_cast<pid_t>(r.U32());
  if (reply->tag != Tag::kOpened || !r.Finish("OPENED").ok() || !reply->fd || pid <= 1) {
    return CorruptError("malformed OPENED frame from the worker");
  }
  ProcessChannel channel;
  channel.socket = std::move(reply->fd);
  // The worker ran no cell: its word is taken (see process_identity.h).
  if (!sandboxed_) {
    channel.process = ProcessIdentity::Trusted(pid);
    return channel;
  }
  // A sandboxed worker names the session process in its own PID namespace:
  // the host finds it below the worker (pid 1 there, itself the child of
  // the process the host started) and the session's keeper.
  std::optional<pid_t> host_pid = DescendantByInnermostPid(process_.pid(), pid, 3);
  if (!host_pid) return CorruptError("the sandboxed worker named a session process it has not");
  channel.process = ProcessIdentity::Trusted(*host_pid, pid);
  return channel;
}

std::optional<int> WorkerProcess::ExitStatus(pid_t pid) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (stopped_ || pid <= 1) return std::nullopt;
  PayloadWriter w;
  w.U32(static_cast<std::uint32_t>(pid));
  if (!protocol::WriteFrame(socket_.get(), Tag::kExitStatus, w.data()).ok()) return std::nullopt;
  // The worker waits at most 2 s for a dying process.
  auto reply = protocol::ReadFrame(socket_.get(), protocol::Clock::now() + std::chrono::seconds(5));
  if (!reply.ok()) {
    stopped_ = true;  // out of step (or gone): never reuse the stream
    return std::nullopt;
  }
  PayloadReader r(reply->payload);
  bool found = r.U8() != 0;
  int status = r.I32();
  if (reply->tag != Tag::kExitStatusReply || !r.Finish("EXIT_STATUS_REPLY").ok() || !found) {
    return std::nullopt;
  }
  return status;
}

void WorkerProcess::Stop() {
  std::lock_guard<std::mutex> guard(mutex_);
  stopped_ = true;
  if (socket_) {
    (void)protocol::WriteFrame(socket_.get(), Tag::kShutdown, {});
    socket_.Reset();
  }
  pid_t pid = process_.pid();
  if (process_ && !process_.Wait(ChildProcess::Clock::now() + kExitGrace).ok()) {
    process_.Kill();
    (void)process_.Wait();
  }
  if (pid > 0) RemoveSandboxCgroup(pid);  // a root host's sandboxed worker's
}

}  // namespace dolsot
