// The server: lock, socket, acceptor threads (each serves the connections
// it accepts), the profiles' Repls and the session -> profile routing.
#include "cli/serve_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <iostream>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <thread>

#include "core/fifo_mutex.h"
#include "cli/list_sessions_command.h"
#include "cli/live_names.h"
#include "cli/names_command.h"
#include "cli/repl_backend.h"
#include "cli/reset_command.h"
#include "cli/run_command.h"
#include "cli/serve_profile.h"
#include "cli/serve_protocol.h"
#include "cli/stored_names.h"
#include "core/exit_codes.h"
#include "core/file_store.h"
#include "core/session_id.h"
#include "core/unique_fd.h"

namespace dolsot::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Acceptor threads kept waiting for the next call, and the most calls
// served at once (more wait in the listening socket's backlog).
constexpr int kSpareAcceptors = 2;
constexpr int kMaxConnections = 256;
// The per-session turn map is swept of unused turns from this size on.
constexpr std::size_t kPruneTurnsAt = 1024;

// How long a connection may take to send its request.
constexpr auto kRequestWait = std::chrono::seconds(30);

int g_wake_write = -1;  // the self-pipe SIGTERM / SIGINT write to

void OnStopSignal(int) {
  const char byte = 's';
  [[maybe_unused]] ssize_t n = ::write(g_wake_write, &byte, 1);
}

void Log(const std::string& line) {
  char stamp[32];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
  std::ostringstream text;
  text << stamp << " dolsot serve[" << ::getpid() << "]: " << line << '\n';
  const std::string s = text.str();
  [[maybe_unused]] ssize_t n = ::write(2, s.data(), s.size());
}

// A Repl for one worker profile (held as the Backend it is), and the sessions
// routed to it.
struct Profile {
  std::string key;
  std::shared_ptr<Backend> repl;
  std::set<std::string> sessions;  // guarded by Server::mutex_
  int users = 0;                   // calls holding it; guarded by Server::mutex_
  std::uint64_t last_used = 0;     // Server::profile_clock_ at its last lending; ditto
};

// Watches a connection while its cell runs: an interrupt frame, EOF (the
// client died) or anything else stops the cell.
class ConnectionWatch {
 public:
  ConnectionWatch(int fd, const std::atomic<bool>& stopping) : fd_(fd), stopping_(stopping) {}
  bool operator()() {
    if (stopped_ || stopping_.load()) return stopped_ = true;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    auto frame = ReadFrame(fd_, kMaxRequestFrame, Clock::now() + std::chrono::seconds(1));
    stopped_ = true;
    if (frame.ok()) {
      auto request = DecodeRequest(*frame);
      if (!request.ok() || request->type != RequestType::kInterrupt) {
        Log("a client sent something other than an interrupt during a cell; stopping it");
      }
    }
    return true;
  }

 private:
  int fd_;
  const std::atomic<bool>& stopping_;
  bool stopped_ = false;
};

class Server;

// The Repl lent to one command: Close gives it back (the Repl stays open).
class LentBackend final : public Backend {
 public:
  LentBackend(Server& server, std::shared_ptr<Profile> profile, std::optional<double> timeout,
              std::unique_lock<FifoMutex> turn, std::shared_lock<std::shared_mutex> admin)
      : server_(server),
        profile_(std::move(profile)),
        timeout_(timeout),
        turn_(std::move(turn)),
        admin_(std::move(admin)) {}
  ~LentBackend() override { (void)Close(); }

  const Capabilities& capabilities() const override { return profile_->repl->capabilities(); }
  StatusOr<Result> Run(std::string_view sid, std::string_view code,
                       const RunOptions& options) override;
  Status Interrupt(std::string_view sid) override { return profile_->repl->Interrupt(sid); }
  StatusOr<std::vector<SessionInfo>> Sessions() override { return profile_->repl->Sessions(); }
  StatusOr<int> Reset(std::string_view target) override { return profile_->repl->Reset(target); }
  Status Close() override;

 private:
  Server& server_;
  std::shared_ptr<Profile> profile_;
  std::optional<double> timeout_;
  std::unique_lock<FifoMutex> turn_;
  std::shared_lock<std::shared_mutex> admin_;
  bool closed_ = false;
};

// The store-level commands (list, reset) on the server's sessions.
class AdminBackend final : public Backend {
 public:
  explicit AdminBackend(Server& server) : server_(server) {}
  const Capabilities& capabilities() const override;
  StatusOr<Result> Run(std::string_view, std::string_view, const RunOptions&) override {
    return Status(ErrorCode::kInternal, "the admin backend runs no cells");
  }
  Status Interrupt(std::string_view) override { return Status::Ok(); }
  StatusOr<std::vector<SessionInfo>> Sessions() override;
  StatusOr<int> Reset(std::string_view target) override;
  Status Close() override { return Status::Ok(); }

 private:
  Server& server_;
};

class Server {
 public:
  explicit Server(const ServerOptions& options) : options_(options), started_(Clock::now()) {}
  int Run();

  // For LentBackend / AdminBackend.
  void GiveBack(const std::shared_ptr<Profile>& profile);
  StatusOr<std::vector<SessionInfo>> StoredSessions() { return admin_repl_->Sessions(); }
  StatusOr<int> ResetSessions(std::string_view target);
  // The names each session live here left after its last cell (--names).
  LiveNames& live_names() { return live_names_; }

 private:
  Status Listen();
  // The acceptors: threads that wait in accept(2) on the listening socket
  // themselves and serve what they accept, so a call costs no thread start
  // and no hand-off from a listening thread (a wake-up, under load a
  // scheduling delay). A thread that accepts makes sure one other still
  // waits (starting one, up to kMaxConnections); one that has served goes
  // back to waiting unless kSpareAcceptors already wait, then it ends.
  // The main thread only keeps time (idle exit), stop signals and joins.
  void StartAcceptorLocked();
  void AcceptLoop(const std::shared_ptr<std::atomic<bool>>& done);
  void Serve(UniqueFd connection);
  ServeReply Handle(const ServeRequest& request, int fd, bool& keep_open);
  ServeReply RunCommandFor(const ServeRequest& request, int fd);
  StatusOr<std::unique_ptr<Backend>> Lend(const BackendSettings& settings,
                                          const ServeRequest& request);
  // Takes session `sid` out of whichever profile holds it (its turn held).
  Status ReleaseSession(const std::string& sid);
  // Closes every profile (the admin lock held exclusively).
  Status ReleaseAll();
  // Takes the least recently used idle profiles out of the map until a new
  // one fits under options_.max_profiles (mutex_ held); the caller closes
  // them once it has let go of mutex_. Their sessions' states are in the
  // store (every cell is checkpointed): the next call restores them.
  std::vector<std::shared_ptr<Profile>> RetireForNewProfileLocked();
  std::shared_ptr<FifoMutex> Turn(const std::string& sid);
  ServeStatus CurrentStatus();
  // --names: the live record, else the store's checkpoint.
  StatusOr<SessionNames> NamesOf(const std::string& sid);
  void Wake() {
    const char byte = 'w';
    [[maybe_unused]] ssize_t n = ::write(wake_write_.get(), &byte, 1);
  }
  void RequestStop() {
    stopping_.store(true);
    Wake();
  }
  void CloseProfile(const std::shared_ptr<Profile>& profile) {
    Status closed = profile->repl->Close();
    if (!closed.ok()) Log("closing a profile: " + closed.message());
  }

  ServerOptions options_;
  Clock::time_point started_;
  UniqueFd lock_, listen_, wake_read_, wake_write_;
  std::shared_ptr<SessionStore> store_;
  FileStore* file_store_ = nullptr;  // store_, for Flush and TakeFlushError
  std::unique_ptr<Backend> admin_repl_;
  std::atomic<bool> stopping_{false};
  LiveNames live_names_;  // for the ids in owner_ (forgotten with them)

  std::mutex mutex_;  // guards everything below
  std::map<std::string, std::shared_ptr<Profile>> profiles_;
  std::uint64_t profile_clock_ = 0;
  std::map<std::string, std::string> owner_;  // session id -> profile key
  std::map<std::string, std::shared_ptr<FifoMutex>> turns_;
  std::size_t prune_turns_at_ = kPruneTurnsAt;  // Turn() sweeps turns_ at this size
  int connections_ = 0;
  int acceptors_ = 0;       // threads serving connections or waiting in accept
  int idle_acceptors_ = 0;  // of those, waiting in accept
  std::list<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> threads_;
  std::vector<UniqueFd> stoppers_;  // closed last: their clients wait for EOF
  std::shared_mutex admin_;          // shared: a call on a profile; exclusive: reset/release all
};

StatusOr<Result> LentBackend::Run(std::string_view sid, std::string_view code,
                                  const RunOptions& options) {
  RunOptions with_timeout = options;
  if (timeout_) with_timeout.timeout_seconds = timeout_;
  auto result = profile_->repl->Run(sid, code, with_timeout);
  server_.live_names().Note(std::string(sid), result);
  return result;
}

Status LentBackend::Close() {
  if (closed_) return Status::Ok();
  closed_ = true;
  server_.GiveBack(profile_);
  if (turn_.owns_lock()) turn_.unlock();
  if (admin_.owns_lock()) admin_.unlock();
  return Status::Ok();
}

const Capabilities& AdminBackend::capabilities() const {
  static const Capabilities kNone;
  return kNone;
}
StatusOr<std::vector<SessionInfo>> AdminBackend::Sessions() { return server_.StoredSessions(); }
StatusOr<int> AdminBackend::Reset(std::string_view target) { return server_.ResetSessions(target); }

// The socket appears at its path only once it listens: bound and made to
// listen under a staged name, then renamed over the path (atomically). A
// client never meets a socket file that refuses it while this server is
// starting, which it would take for a dead server's ("the server was
// gone"). The stale one, if any, is replaced by the rename.
Status Server::Listen() {
  const std::string& staged = options_.paths.staged;
  ::unlink(staged.c_str());  // a staged socket a killed server left: the lock is ours
  listen_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listen_) return IoError(std::string("socket: ") + std::strerror(errno));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (options_.paths.socket.size() >= sizeof(address.sun_path) ||
      staged.size() >= sizeof(address.sun_path)) {
    return InvalidArgument("socket path too long: " + options_.paths.socket);
  }
  std::memcpy(address.sun_path, staged.c_str(), staged.size() + 1);
  if (::bind(listen_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    return IoError("bind " + staged + ": " + std::strerror(errno));
  }
  if (::listen(listen_.get(), 128) != 0) {
    const int error = errno;
    ::unlink(staged.c_str());
    return IoError(std::string("listen: ") + std::strerror(error));
  }
  if (::rename(staged.c_str(), options_.paths.socket.c_str()) != 0) {
    const int error = errno;
    ::unlink(staged.c_str());
    return IoError("rename " + staged + " to " + options_.paths.socket + ": " + std::strerror(error));
  }
  return Status::Ok();
}

int Server::Run() {
  ::umask(077);
  UniqueFd start_lock;
  if (options_.ready_fd < 0) {  // foreground: serialise with clients starting one
    start_lock = UniqueFd(::open(options_.paths.start_lock.c_str(),
                                 O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (start_lock) ::flock(start_lock.get(), LOCK_EX);
  }
  auto ready = [&](const char* word) {
    if (options_.ready_fd < 0) return;
    [[maybe_unused]] ssize_t n = ::write(options_.ready_fd, word, std::strlen(word));
    ::close(options_.ready_fd);
    options_.ready_fd = -1;
  };
  lock_ = UniqueFd(::open(options_.paths.lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!lock_) {
    std::cerr << "dolsot: error: cannot open " << options_.paths.lock << ": " << std::strerror(errno) << '\n';
    ready("fail\n");
    return kExitFailure;
  }
  if (::flock(lock_.get(), LOCK_EX | LOCK_NB) != 0) {
    std::cerr << "dolsot: error: a dolsot server already runs for " << options_.paths.cache_dir << '\n';
    ready("busy\n");
    return kExitFailure;
  }
  auto own_config = ResolveConfig(ConfigOverrides{});
  // Deferred durability (core/file_store.h): a call is answered once its
  // checkpoint is in the kernel; the store's flusher puts it on disk right
  // after (docs/cli.md, "Durability").
  FileStoreOptions store_options;
  store_options.defer_durability = true;
  store_options.log = [](const std::string& line) { Log(line); };
  auto store = FileStore::Open(options_.paths.cache_dir,
                               own_config.ok() ? own_config->ttl_days : kDefaultTtlDays,
                               std::move(store_options));
  if (!store.ok()) {
    std::cerr << "dolsot: error: " << store.status().message() << '\n';
    ready("fail\n");
    return kExitFailure;
  }
  file_store_ = store->get();
  store_ = std::move(store).value();
  ReplOptions admin_options;
  admin_options.store = store_;
  admin_options.config.cache_dir = options_.paths.cache_dir;
  admin_options.config.typecheck = false;
  admin_options.checkpoint = CheckpointMode::kSync;
  auto admin = OpenRepl(std::move(admin_options));
  if (!admin.ok()) {
    std::cerr << "dolsot: error: " << admin.status().message() << '\n';
    ready("fail\n");
    return kExitFailure;
  }
  admin_repl_ = std::move(admin).value();
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::cerr << "dolsot: error: pipe: " << std::strerror(errno) << '\n';
    ready("fail\n");
    return kExitFailure;
  }
  wake_read_ = UniqueFd(pipe_fds[0]);
  wake_write_ = UniqueFd(pipe_fds[1]);
  g_wake_write = wake_write_.get();
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  if (Status listening = Listen(); !listening.ok()) {
    std::cerr << "dolsot: error: " << listening.message() << '\n';
    ready("fail\n");
    return kExitFailure;
  }
  Log("listening on " + options_.paths.socket + " for " + options_.paths.cache_dir);
  ready("ready\n");
  start_lock.Reset();

  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (int i = 0; i < kSpareAcceptors; ++i) StartAcceptorLocked();
  }
  auto idle_since = Clock::now();
  const auto idle = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.idle_seconds));
  while (!stopping_.load()) {
    int timeout_ms = -1;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      for (auto it = threads_.begin(); it != threads_.end();) {
        if (it->second->load()) {
          it->first.join();
          it = threads_.erase(it);
        } else {
          ++it;
        }
      }
      if (connections_ == 0) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(idle_since + idle - Clock::now());
        if (left.count() <= 0) {
          Log("idle for " + std::to_string(options_.idle_seconds) + " s; exiting");
          break;
        }
        timeout_ms = static_cast<int>(std::min<long long>(left.count() + 1, 1 << 30));
      }
    }
    pollfd wake{wake_read_.get(), POLLIN, 0};
    int n = ::poll(&wake, 1, timeout_ms);
    if (n < 0 && errno != EINTR) {
      Log(std::string("poll: ") + std::strerror(errno));
      break;
    }
    if (wake.revents & POLLIN) {
      char buffer[64];
      ssize_t got;
      bool stop_signal = false;
      while ((got = ::read(wake_read_.get(), buffer, sizeof buffer)) > 0) {
        for (ssize_t i = 0; i < got; ++i) stop_signal |= buffer[i] == 's';
      }
      if (stop_signal) {
        Log("stop signal; stopping");
        stopping_.store(true);
      }
      std::lock_guard<std::mutex> guard(mutex_);
      if (connections_ == 0) idle_since = Clock::now();
    }
  }

  // Stop: no new connections, running cells stopped (their clients get exit
  // 130), every Repl closed (checkpointed), then the lock and the stoppers.
  stopping_.store(true);
  ::unlink(options_.paths.socket.c_str());
  // Wakes every acceptor waiting in accept(2) (EINVAL); the socket closes
  // once none uses it.
  ::shutdown(listen_.get(), SHUT_RDWR);
  std::list<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> threads;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    threads.swap(threads_);
  }
  for (auto& [thread, done] : threads) thread.join();
  listen_.Reset();
  {
    std::unique_lock<std::shared_mutex> exclusive(admin_);
    (void)ReleaseAll();
  }
  (void)admin_repl_->Close();
  // Every checkpoint on disk before the lock goes (a --stop client waits
  // for it); a failure is logged (the pending files stay for the next load).
  if (Status flushed = file_store_->Flush(); !flushed.ok()) {
    Log("at exit, " + flushed.message());
  }
  Log("stopped");
  lock_.Reset();
  std::vector<UniqueFd> stoppers;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stoppers.swap(stoppers_);
  }
  stoppers.clear();
  return kExitOk;
}

void Server::StartAcceptorLocked() {
  auto done = std::make_shared<std::atomic<bool>>(false);
  ++acceptors_;
  ++idle_acceptors_;
  threads_.emplace_back([this, done]() { AcceptLoop(done); }, done);
}

void Server::AcceptLoop(const std::shared_ptr<std::atomic<bool>>& done) {
  auto leave = [&]() {  // mutex_ held
    --acceptors_;
    done->store(true);
  };
  for (;;) {
    UniqueFd connection(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    const int error = errno;
    if (stopping_.load()) {
      std::lock_guard<std::mutex> guard(mutex_);
      --idle_acceptors_;
      leave();
      return;
    }
    if (!connection) {
      if (error == EINTR || error == ECONNABORTED) continue;
      if (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM) {
        // Out of descriptors or memory: the client waits in the backlog;
        // try again shortly rather than spin.
        Log(std::string("accept: ") + std::strerror(error) + "; retrying");
        pollfd none{-1, 0, 0};
        ::poll(&none, 1, 100);
        continue;
      }
      Log(std::string("accept: ") + std::strerror(error));
      std::lock_guard<std::mutex> guard(mutex_);
      --idle_acceptors_;
      leave();
      RequestStop();  // the listening socket is broken: nothing more can come
      return;
    }
    ucred peer{};
    socklen_t length = sizeof peer;
    if (::getsockopt(connection.get(), SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0 ||
        peer.uid != ::getuid()) {
      Log("refused a connection from uid " + std::to_string(peer.uid) + " (pid " +
          std::to_string(peer.pid) + "): only uid " + std::to_string(::getuid()) + " is served");
      continue;
    }
    {
      std::lock_guard<std::mutex> guard(mutex_);
      --idle_acceptors_;
      ++connections_;
      if (idle_acceptors_ == 0 && acceptors_ < kMaxConnections) StartAcceptorLocked();
    }
    Serve(std::move(connection));
    {
      std::lock_guard<std::mutex> guard(mutex_);
      --connections_;
      if (idle_acceptors_ >= kSpareAcceptors || stopping_.load()) {
        leave();
        Wake();  // the main thread joins this thread, and keeps time again
        return;
      }
      ++idle_acceptors_;
    }
    Wake();  // the main thread keeps time again when no call runs
  }
}

void Server::Serve(UniqueFd connection) {
  auto frame = ReadFrame(connection.get(), kMaxRequestFrame, Clock::now() + kRequestWait,
                         [this]() -> Status {
                           if (stopping_.load()) return Status(ErrorCode::kUnavailable, "stopping");
                           return Status::Ok();
                         });
  if (!frame.ok()) {
    if (frame.status().code() != ErrorCode::kUnavailable) {
      Log("bad frame: " + frame.status().message());
      ServeReply reply;
      reply.type = ReplyType::kError;
      reply.message = frame.status().message();
      (void)WriteFrame(connection.get(), EncodeReply(reply), kMaxResponseFrame);
    }
    return;
  }
  auto request = DecodeRequest(*frame);
  ServeReply reply;
  bool keep_open = false;
  if (!request.ok()) {
    Log(request.status().message());
    reply.type = ReplyType::kError;
    reply.message = request.status().message();
  } else {
    reply = Handle(*request, connection.get(), keep_open);
  }
  Status sent = WriteFrame(connection.get(), EncodeReply(reply), kMaxResponseFrame);
  if (!sent.ok() && sent.code() != ErrorCode::kUnavailable) Log("reply: " + sent.message());
  if (keep_open) {
    std::lock_guard<std::mutex> guard(mutex_);
    stoppers_.push_back(std::move(connection));
  }
}

ServeReply Server::Handle(const ServeRequest& request, int fd, bool& keep_open) {
  ServeReply reply;
  reply.type = ReplyType::kOk;
  switch (request.type) {
    case RequestType::kRun:
    case RequestType::kList:
    case RequestType::kReset:
    case RequestType::kNames:
      return RunCommandFor(request, fd);
    case RequestType::kStatus:
      reply.type = ReplyType::kStatus;
      reply.status = CurrentStatus();
      return reply;
    case RequestType::kStop:
      Log("stop requested");
      keep_open = true;
      RequestStop();
      return reply;
    case RequestType::kRelease: {
      Status released = ValidateResetTarget(request.target);
      if (released.ok() && request.target == kAllSessions) {
        std::unique_lock<std::shared_mutex> exclusive(admin_);
        released = ReleaseAll();
      } else if (released.ok()) {
        auto turn = Turn(request.target);
        std::lock_guard<FifoMutex> held(*turn);
        released = ReleaseSession(request.target);
      }
      if (!released.ok()) {
        reply.type = ReplyType::kError;
        reply.message = released.message();
      }
      return reply;
    }
    case RequestType::kInterrupt:
      break;
  }
  reply.type = ReplyType::kError;
  reply.message = "an interrupt with no cell running";
  return reply;
}

ServeReply Server::RunCommandFor(const ServeRequest& request, int fd) {
  ServeReply reply;
  std::ostringstream out, err;
  std::istringstream in;
  const EnvLookup env = LookupIn(request.env);
  UniqueFd cwd(::open(request.cwd.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const int cwd_error = errno;  // before anything else can overwrite it
  // The call's cache directory must be this server's: a client finds its
  // server by it, so anything else is a client bug.
  auto config = ResolveConfig(ConfigOverrides{}, env);
  ConnectionWatch watch(fd, stopping_);
  BackendFactory factory;
  if (request.type == RequestType::kRun) {
    factory = [this, &request](const BackendSettings& settings) { return Lend(settings, request); };
  } else {
    factory = [this](const BackendSettings&) -> StatusOr<std::unique_ptr<Backend>> {
      return std::unique_ptr<Backend>(new AdminBackend(*this));
    };
  }
  CommandContext context{out, err, in, false, request.json || request.run.json_lines, factory, UnixNow,
                         [&watch]() { return watch(); }};
  context.image_base_fd = cwd ? cwd.get() : AT_FDCWD;
  if (request.type == RequestType::kRun && config.ok()) {
    // The cell's stdout as it comes: "chunk" replies ahead of the answer.
    context.stream_out = [fd](std::string_view text) {
      ServeReply chunk;
      chunk.type = ReplyType::kChunk;
      chunk.out = std::string(text);
      (void)WriteFrame(fd, EncodeReply(chunk), kMaxResponseFrame);
    };
    context.stream_max_output = config->max_output;
  }
  if (!cwd) {
    reply.exit_code = ReportSetupError(
        err, InvalidArgument("the working directory " + request.cwd + " is not reachable: " +
                             std::strerror(cwd_error)));
  } else if (config.ok() && config->cache_dir != options_.paths.cache_dir) {
    char real[PATH_MAX];
    const bool same = ::realpath(config->cache_dir.c_str(), real) != nullptr &&
                      options_.paths.cache_dir == real;
    if (!same) {
      reply.exit_code = ReportSetupError(
          err, Status(ErrorCode::kConfig, "this dolsot server serves " + options_.paths.cache_dir +
                                              ", not " + config->cache_dir));
    }
  }
  if (err.str().empty()) {
    switch (request.type) {
      case RequestType::kRun:
        reply.exit_code = RunCommand(request.run, context);
        break;
      case RequestType::kList:
        reply.exit_code = ListSessionsCommand(ListSessionsArgs{true}, context);
        break;
      case RequestType::kNames:
        context.session_names = [this](const std::string& sid) { return NamesOf(sid); };
        reply.exit_code = NamesCommand(NamesArgs{request.target}, context);
        break;
      default:
        reply.exit_code = ResetCommand(ResetArgs{request.target}, context);
        break;
    }
  }
  reply.out = out.str();
  reply.err = err.str();
  // A checkpoint of this session whose flush failed after its call was
  // answered: said once, to the next call on the session (and in the log).
  if (request.type == RequestType::kRun && request.run.session) {
    if (auto failed = file_store_->TakeFlushError(*request.run.session)) {
      reply.err += "dolsot: warning: " + *failed + "\n";
    }
  }
  return reply;
}

StatusOr<std::unique_ptr<Backend>> Server::Lend(const BackendSettings& settings,
                                                const ServeRequest& request) {
  const std::string sid = request.run.session.value_or("");
  const EnvLookup env = LookupIn(request.env);
  // Every setting resolved from the caller's environment, not the server's.
  ConfigOverrides overrides;
  overrides.max_repr = settings.max_repr;
  overrides.max_text = settings.max_text;
  auto config = ResolveConfig(overrides, env);
  if (!config.ok()) return config.status();
  std::shared_lock<std::shared_mutex> admin(admin_);
  auto turn_mutex = Turn(sid);
  std::unique_lock<FifoMutex> turn(*turn_mutex);
  const std::string key = ProfileKey(settings, request.cwd, request.env);
  std::string current;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (auto it = owner_.find(sid); it != owner_.end()) current = it->second;
  }
  if (!current.empty() && current != key) DOLSOT_RETURN_IF_ERROR(ReleaseSession(sid));
  std::shared_ptr<Profile> profile;
  std::vector<std::shared_ptr<Profile>> retired;
  std::unique_lock<std::mutex> guard(mutex_);
  if (auto it = profiles_.find(key); it != profiles_.end()) {
    profile = it->second;
  } else {
    retired = RetireForNewProfileLocked();
    auto options = ReplOptionsFor(settings, env);
    if (!options.ok()) return options.status();
    options->snapshots = true;  // a killed cell goes back to its state before it
    options->spare_session = true;  // a new session's first call takes one opened ahead
    // Every finished cell checkpointed before its answer (in the kernel;
    // the store makes it durable right after: FileStoreOptions).
    options->checkpoint = CheckpointMode::kSync;
    options->store = store_;
    options->worker_directory = request.cwd;
    options->worker_base_environment = request.env;
    // The type gate's "" (the cwd, as in sys.path) is the caller's cwd, where
    // the worker runs, not the server's ("/").
    for (std::string& dir : options->typecheck_path) {
      if (dir.empty()) dir = request.cwd;
    }
    ConfigOverrides& c = options->config;
    c.cache_dir = options_.paths.cache_dir;
    c.ttl_days = config->ttl_days;
    c.timeout_seconds = config->timeout_seconds;
    c.max_output = config->max_output;
    c.max_repr = config->max_repr;
    c.max_text = config->max_text;
    c.typecheck = config->typecheck;
    c.ty_bin = config->ty_bin;
    auto repl = OpenRepl(std::move(options).value());
    if (!repl.ok()) return repl.status();
    profile = std::make_shared<Profile>();
    profile->key = key;
    profile->repl = std::move(repl).value();
    profiles_[key] = profile;
  }
  ++profile->users;
  profile->last_used = ++profile_clock_;
  profile->sessions.insert(sid);
  owner_[sid] = key;
  guard.unlock();
  for (auto& old : retired) CloseProfile(old);
  return std::unique_ptr<Backend>(new LentBackend(*this, profile, settings.timeout_seconds,
                                                  std::move(turn), std::move(admin)));
}

void Server::GiveBack(const std::shared_ptr<Profile>& profile) {
  std::lock_guard<std::mutex> guard(mutex_);
  --profile->users;
}

StatusOr<SessionNames> Server::NamesOf(const std::string& sid) {
  if (auto live = live_names_.Find(sid)) {
    return SessionNames{SessionNames::Source::kLive, std::move(*live)};
  }
  return NamesInStore(*store_, sid);
}

Status Server::ReleaseSession(const std::string& sid) {
  std::shared_ptr<Profile> profile;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = owner_.find(sid);
    if (it == owner_.end()) return Status::Ok();
    // Found, never inserted: a `reset all` may have emptied the map since.
    if (auto found = profiles_.find(it->second); found != profiles_.end()) profile = found->second;
  }
  if (profile) DOLSOT_RETURN_IF_ERROR(profile->repl->Release(sid));
  bool retire = false;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    owner_.erase(sid);
    live_names_.Forget(sid);
    if (profile) {
      profile->sessions.erase(sid);
      // A Repl with no live session is closed.
      auto found = profiles_.find(profile->key);
      if (profile->sessions.empty() && profile->users == 0 && found != profiles_.end() &&
          found->second == profile) {
        profiles_.erase(found);
        retire = true;
      }
    }
  }
  if (retire) CloseProfile(profile);
  return Status::Ok();
}

std::vector<std::shared_ptr<Profile>> Server::RetireForNewProfileLocked() {
  std::vector<std::shared_ptr<Profile>> retired;
  while (profiles_.size() >= static_cast<std::size_t>(options_.max_profiles)) {
    auto oldest = profiles_.end();
    for (auto it = profiles_.begin(); it != profiles_.end(); ++it) {
      if (it->second->users == 0 &&
          (oldest == profiles_.end() || it->second->last_used < oldest->second->last_used)) {
        oldest = it;
      }
    }
    if (oldest == profiles_.end()) break;  // every one is in use: over the cap until they end
    for (const std::string& sid : oldest->second->sessions) {
      if (auto owner = owner_.find(sid); owner != owner_.end() && owner->second == oldest->first) {
        owner_.erase(owner);
        live_names_.Forget(sid);
      }
    }
    Log("retiring an idle worker profile (over DOLSOT_SERVE_PROFILES=" +
        std::to_string(options_.max_profiles) + ")");
    retired.push_back(oldest->second);
    profiles_.erase(oldest);
  }
  return retired;
}

Status Server::ReleaseAll() {
  std::map<std::string, std::shared_ptr<Profile>> profiles;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    profiles.swap(profiles_);
    owner_.clear();
    live_names_.Clear();
  }
  for (auto& [key, profile] : profiles) CloseProfile(profile);
  return Status::Ok();
}

StatusOr<int> Server::ResetSessions(std::string_view target_view) {
  const std::string target(target_view);
  if (target == kAllSessions) {
    std::unique_lock<std::shared_mutex> exclusive(admin_);
    DOLSOT_RETURN_IF_ERROR(ReleaseAll());
    return admin_repl_->Reset(target);
  }
  DOLSOT_RETURN_IF_ERROR(ValidateResetTarget(target));
  auto turn = Turn(target);
  std::lock_guard<FifoMutex> held(*turn);
  DOLSOT_RETURN_IF_ERROR(ReleaseSession(target));
  return admin_repl_->Reset(target);
}

std::shared_ptr<FifoMutex> Server::Turn(const std::string& sid) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (turns_.size() >= prune_turns_at_) {
    // A turn only the map holds has no caller holding or awaiting it, and
    // none can get it but through here: forgetting it is safe (a later call
    // makes a new one). So the map stays as large as the calls in flight,
    // not as every session id the server ever saw (amortized: the next
    // sweep waits until the map doubles).
    for (auto it = turns_.begin(); it != turns_.end();) {
      it = it->second.use_count() == 1 ? turns_.erase(it) : std::next(it);
    }
    prune_turns_at_ = std::max<std::size_t>(kPruneTurnsAt, 2 * turns_.size());
  }
  auto& turn = turns_[sid];
  if (!turn) turn = std::make_shared<FifoMutex>();
  return turn;
}

ServeStatus Server::CurrentStatus() {
  ServeStatus status;
  status.pid = ::getpid();
  status.socket = options_.paths.socket;
  status.cache_dir = options_.paths.cache_dir;
  status.uptime_seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  std::vector<std::shared_ptr<Profile>> profiles;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (auto& [key, profile] : profiles_) profiles.push_back(profile);
  }
  std::set<std::string> live;
  for (auto& profile : profiles) {
    for (auto& sid : profile->repl->LiveSessions()) live.insert(sid);
  }
  status.live_sessions.assign(live.begin(), live.end());
  status.profiles = static_cast<int>(profiles.size());
  return status;
}

}  // namespace

int RunServer(const ServerOptions& options) {
  Server server(options);
  return server.Run();
}

}  // namespace dolsot::cli
