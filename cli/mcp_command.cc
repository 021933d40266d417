// The mcp command: the process around McpServer (fds, signals, the Repl).
#include "cli/mcp_command.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstring>

#include "cli/json_rpc.h"
#include "cli/mcp_server.h"
#include "cli/sandbox_options.h"
#include "core/exit_codes.h"
#include "core/unique_fd.h"

#ifndef DOLSOT_VERSION
#define DOLSOT_VERSION "unknown"
#endif

namespace dolsot::cli {
namespace {

// The self-pipe a stop signal (SIGTERM, SIGINT, SIGHUP) wakes the input loop
// through; a second stop signal exits at once, as the CLI does.
int g_stop_pipe_write = -1;
std::atomic<int> g_stop_signals{0};
static_assert(std::atomic<int>::is_always_lock_free, "needed in a signal handler");

void OnStopSignal(int signal_number) {
  if (g_stop_signals.fetch_add(1) > 0) ::_exit(128 + signal_number);
  const char byte = 1;
  [[maybe_unused]] ssize_t written = ::write(g_stop_pipe_write, &byte, 1);
}

// A write to a transport whose reader is gone fails with EPIPE instead of
// killing the process. A handler, not SIG_IGN: exec resets a handler, so the
// processes the Repl starts get the default back.
void OnBrokenPipe(int) {}

Status InstallSignalHandlers(int stop_pipe_write) {
  g_stop_pipe_write = stop_pipe_write;
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  action.sa_handler = OnStopSignal;
  for (int signal_number : {SIGTERM, SIGINT, SIGHUP}) {
    if (::sigaction(signal_number, &action, nullptr) != 0) {
      return IoError(std::string("sigaction: ") + std::strerror(errno));
    }
  }
  action.sa_handler = OnBrokenPipe;
  if (::sigaction(SIGPIPE, &action, nullptr) != 0) {
    return IoError(std::string("sigaction: ") + std::strerror(errno));
  }
  return Status::Ok();
}

struct Transport {
  UniqueFd in;
  UniqueFd out;
};

// Moves the transport off fds 0 and 1 (see McpCommand in the header).
StatusOr<Transport> TakeOverStdio() {
  Transport transport{UniqueFd(::fcntl(0, F_DUPFD_CLOEXEC, 3)), UniqueFd(::fcntl(1, F_DUPFD_CLOEXEC, 3))};
  if (!transport.in) return InvalidArgument("stdin is not open: dolsot mcp reads its requests there");
  if (!transport.out) return InvalidArgument("stdout is not open: dolsot mcp answers there");
  UniqueFd null_device(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!null_device) return IoError(std::string("/dev/null: ") + std::strerror(errno));
  const bool stderr_open = ::fcntl(2, F_GETFD) >= 0;
  if (::dup2(null_device.get(), 0) < 0 || ::dup2(stderr_open ? 2 : null_device.get(), 1) < 0) {
    return IoError(std::string("dup2: ") + std::strerror(errno));
  }
  return transport;
}

bool WriteAll(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Reads requests until stdin ends, a stop signal arrives or the peer stops
// reading.
void ServeInput(int in_fd, int stop_fd, McpServer& server) {
  LineSplitter splitter;
  const auto on_line = [&server](StatusOr<std::string> line) { server.HandleLine(std::move(line)); };
  std::string buffer(64 * 1024, '\0');
  while (server.PeerConnected()) {
    pollfd fds[2] = {{in_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    const ssize_t n = ::read(in_fd, buffer.data(), buffer.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {  // end of input (or a read error: the same for a pipe)
      splitter.Finish(on_line);
      return;
    }
    splitter.Feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)), on_line);
  }
}

}  // namespace

CLI::App* AddMcpCommand(CLI::App& app, McpArgs& args) {
  CLI::App* mcp = app.add_subcommand(
      "mcp",
      "Serve the Model Context Protocol on stdin/stdout (tools: run, sessions, reset) until "
      "stdin closes; sessions stay live between calls");
  mcp->footer(
      "Tools: run(session, code, timeout?), sessions(), reset(session or \"all\").\n"
      "One JSON-RPC message per line on stdin, one answer per line on stdout; what a cell\n"
      "writes to fd 1 goes to stderr. Sessions stay live and are checkpointed to\n"
      "DOLSOT_CACHE_DIR after every cell (--checkpoint async: while the next one runs,\n"
      "flushed at exit; sync: before the answer). Exits 0 when stdin closes or on SIGTERM.\n"
      "--sandbox (or DOLSOT_SANDBOX=1) runs every cell inside the kernel's walls, with\n"
      "--mount, --network and --memory as for a run (docs/sandbox.md).\n"
      "In an MCP host's configuration:\n"
      "  {\"command\": \"dolsot\", \"args\": [\"mcp\", \"--toolbox\", \"mytools:mt\"]}");
  AddBackendOptions(*mcp, args.backend);
  // The run command's --sandbox, --mount, --network and --memory, parsed by
  // the same code (cli/sandbox_options.h); --check is the run command's own.
  std::vector<CLI::Option*> sandbox = AddSandboxOptions(*mcp, args.backend.sandbox);
  for (CLI::Option* option : sandbox) {
    if (option->get_name() == "--check") mcp->remove_option(option);
  }
  mcp->add_option("--checkpoint", args.checkpoint,
                  "async (default): a cell's checkpoint is written while the next one runs and "
                  "flushed at exit; sync: on disk before its answer (a killed server loses "
                  "nothing it answered, at ~15 ms a cell)")
      ->check(CLI::IsMember({"async", "sync"}))
      ->type_name("MODE");
  return mcp;
}

int McpCommand(const McpArgs& args, const CommandContext& context) {
  auto settings = ResolveBackendArgs(args.backend);
  if (!settings.ok()) return ReportError(context.err, settings.status());
  settings->snapshots = true;  // sessions stay live: each cell gets its rollback point
  settings->durable_each_cell = args.checkpoint == "sync";
  // A toolbox that does not import is refused before anything is served
  // (exit 2 naming it), not answered with `initialize` and then every `run`
  // failing. Without toolboxes the worker starts with the first cell, so
  // `initialize` is answered at once.
  settings->start_worker = !settings->toolboxes.empty();
  auto transport = TakeOverStdio();
  if (!transport.ok()) return ReportError(context.err, transport.status());
  int stop_pipe[2];
  if (::pipe2(stop_pipe, O_CLOEXEC) != 0) {
    return ReportError(context.err, IoError(std::string("pipe: ") + std::strerror(errno)));
  }
  // The write end stays open until the process exits: a signal handler may
  // still write to it after this function returns.
  UniqueFd stop_read(stop_pipe[0]);
  if (Status installed = InstallSignalHandlers(stop_pipe[1]); !installed.ok()) {
    return ReportError(context.err, installed);
  }
  auto backend = context.open_backend(*settings);
  if (!backend.ok()) return ReportSetupError(context.err, backend.status());

  McpServerOptions options;
  options.version = DOLSOT_VERSION;
  options.toolboxes = settings->toolboxes;
  options.now = context.now;
  const int out_fd = transport->out.get();
  {
    McpServer server(**backend, [out_fd](const std::string& line) { return WriteAll(out_fd, line + '\n'); },
                     std::move(options));
    ServeInput(transport->in.get(), stop_read.get(), server);
    server.Shutdown();  // stops the running cells, answers them, joins their threads
  }
  if (Status closed = (*backend)->Close(); !closed.ok()) {
    context.err << "dolsot: warning: " << closed.message() << '\n';
    context.err.flush();
  }
  return kExitOk;
}

}  // namespace dolsot::cli
