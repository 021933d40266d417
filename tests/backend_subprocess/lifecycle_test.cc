// Repl lifecycle from a C++ host: parallel sessions, arrival order on one
// session, a worker killed from outside, and nothing left behind after 1000
// cells and Close (no child process, no descriptor); a worker of another
// protocol version says so.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "backend_subprocess/protocol.h"
#include "backend_subprocess/repl.h"
#include "backend_subprocess/worker_loop.h"
#include "backend_subprocess/worker_process.h"
#include "core/memory_store.h"
#include "tests/backend_subprocess/repl_test_support.h"

namespace dolsot {
namespace {

std::unique_ptr<Repl> MakeRepl() {
  return repl_testing::MakeTestRepl(/*snapshots=*/true, CheckpointMode::kAsync);  // the defaults
}

int CountFds() {
  int n = 0;
  for (auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++n;
  }
  return n;
}

std::vector<pid_t> Children() {
  std::vector<pid_t> out;
  for (const repl_testing::ProcEntry& p : repl_testing::ReadProcTable()) {
    if (p.ppid == ::getpid()) out.push_back(p.pid);
  }
  return out;
}

std::string TempFifo() {
  std::string path = std::filesystem::temp_directory_path() /
                     ("dolsot-fifo-" + std::to_string(::getpid()) + "-" +
                      std::to_string(reinterpret_cast<std::uintptr_t>(&path)));
  ::unlink(path.c_str());
  EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
  return path;
}

TEST(Lifecycle, DifferentSessionsRunInParallel) {
  auto repl = MakeRepl();
  std::string fifo = TempFifo();
  // Each cell blocks until the other opens the fifo: only a parallel run ends.
  Result a, b;
  std::thread reader([&] { a = repl->Run("a", "open('" + fifo + "').read()", {}).value(); });
  std::thread writer([&] {
    b = repl->Run("b", "f = open('" + fifo + "', 'w')\nf.write('x')\nf.close()", {}).value();
  });
  reader.join();
  writer.join();
  ::unlink(fifo.c_str());
  EXPECT_EQ(a.value, "'x'");
  EXPECT_TRUE(b.ok) << b.error.value_or("");
}

TEST(Lifecycle, OneSessionServesCallsInArrivalOrder) {
  auto repl = MakeRepl();
  std::string fifo = TempFifo();
  ASSERT_TRUE(repl->Run("s", "log = []", {}).ok());
  std::thread first([&] {
    (void)repl->Run("s", "log.append(1)\nopen('" + fifo + "').read()\nlog.append(2)", {});
  });
  std::ofstream release(fifo);  // opens once the first cell is running
  std::thread second([&] { (void)repl->Run("s", "log.append(3)", {}); });
  release << "go";
  release.close();
  first.join();
  second.join();
  ::unlink(fifo.c_str());
  EXPECT_EQ(repl->Run("s", "log", {}).value().value, "[1, 2, 3]");
}

TEST(Lifecycle, AWorkerKilledFromOutsideIsReplaced) {
  auto repl = MakeRepl();
  ASSERT_TRUE(repl->Run("a", "x = 1", {}).ok());
  int worker = repl->WorkerPid();
  ASSERT_GT(worker, 0);
  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  // Live sessions do not depend on the worker; new ones get a new worker.
  EXPECT_EQ(repl->Run("a", "x", {}).value().value, "1");
  EXPECT_EQ(repl->Run("b", "2 + 2", {}).value().value, "4");
  EXPECT_NE(repl->WorkerPid(), worker);
}

TEST(Lifecycle, NothingLeftAfterAThousandCellsAndClose) {
  int fds_before = CountFds();
  auto repl = MakeRepl();
  for (int i = 0; i < 1000; ++i) {
    auto r = repl->Run("s" + std::to_string(i % 3), "v = " + std::to_string(i), {});
    ASSERT_TRUE(r.ok() && r->ok);
  }
  RunOptions quick;
  quick.timeout_seconds = 0.2;
  EXPECT_EQ(repl->Run("s0", "while True: pass", quick).value().exit_code, kExitTimeout);
  ASSERT_TRUE(repl->Close().ok());
  EXPECT_TRUE(repl->Close().ok());  // idempotent
  EXPECT_EQ(repl->Run("s0", "1", {}).status().code(), ErrorCode::kUnavailable);
  EXPECT_TRUE(Children().empty());
  EXPECT_EQ(CountFds(), fds_before);
}

TEST(Lifecycle, CloseDoesNotWaitForeverOnAStuckCheckpointWriter) {
  ReplOptions options;
  options.store = std::make_shared<MemoryStore>();
  options.config.typecheck = false;
  options.config.timeout_seconds = 1;
  options.checkpoint = CheckpointMode::kAsync;
  auto repl = std::move(Repl::Create(std::move(options))).value();
  auto r = repl->Run("s",
                     "class Stuck:\n"
                     "    def __reduce__(self):\n"
                     "        import time\n"
                     "        time.sleep(3600)\n"
                     "stuck = Stuck()",
                     {});
  ASSERT_TRUE(r.ok() && r->ok);
  // The writer never finishes; Close gives up on it after its patience, and
  // on its own try (within the timeout), says the state was not saved, and
  // still leaves nothing behind.
  Status closed = repl->Close();
  EXPECT_EQ(closed.code(), ErrorCode::kIo) << closed.ToString();
  EXPECT_NE(closed.message().find("s: "), std::string::npos) << closed.message();
  EXPECT_TRUE(Children().empty());
}

TEST(Lifecycle, AWorkerOfAnotherProtocolVersionSaysSo) {
  auto pair = protocol::SocketPair();
  ASSERT_TRUE(pair.ok());
  std::vector<std::string> command = DefaultWorkerCommand();
  ASSERT_FALSE(command.empty());
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pair->second.get(), 3);  // the new descriptor is not close-on-exec
    ::setenv(kWorkerFdVariable, "3", 1);
    std::vector<char*> argv;
    for (auto& arg : command) argv.push_back(arg.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  pair->second.Reset();
  protocol::PayloadWriter hello;
  hello.U32(protocol::kProtocolVersion + 1);
  ASSERT_TRUE(protocol::WriteFrame(pair->first.get(), protocol::Tag::kHello, hello.data()).ok());
  auto reply = protocol::ReadFrame(pair->first.get(),
                                   protocol::Clock::now() + std::chrono::seconds(60));
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->tag, protocol::Tag::kHelloError);
  protocol::PayloadReader r(reply->payload);
  (void)r.U32();  // the error code
  std::string message = r.Str();
  EXPECT_TRUE(r.Finish("HELLO_ERROR").ok());
  EXPECT_NE(message.find("protocol version mismatch"), std::string::npos) << message;
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << status;
}

// A worker that dies before its handshake is reported with its exit status
// (or signal) and the end of what it wrote to stderr, through Run's Result.
TEST(Lifecycle, AWorkerThatDiesAtStartSaysHowAndWhatItWrote) {
  struct Case {
    std::string script;
    std::string how;
  };
  for (const Case& c : {Case{"echo starting >&2; echo boom >&2; exit 3", "exited with status 3"},
                        Case{"echo boom >&2; kill -SEGV $$", "was killed by signal 11 (SIGSEGV)"}}) {
    ReplOptions options;
    options.store = std::make_shared<MemoryStore>();
    options.config.typecheck = false;
    options.worker_command = {"/bin/sh", "-c", c.script};
    auto repl = Repl::Create(std::move(options));
    ASSERT_TRUE(repl.ok()) << repl.status().ToString();
    auto r = (*repl)->Run("s", "1", {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r->ok);
    ASSERT_TRUE(r->error.has_value());
    const std::string& error = *r->error;
    EXPECT_NE(error.find("the worker '/bin/sh' " + c.how + " before it answered"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("boom"), std::string::npos) << error;
    EXPECT_TRUE(Children().empty());  // reaped
  }
}

// A worker that never answers is killed at the deadline, with its group,
// and what it wrote is still shown.
TEST(Lifecycle, AWorkerThatNeverAnswersIsKilledAtTheDeadline) {
  ReplOptions options;
  options.store = std::make_shared<MemoryStore>();
  options.config.typecheck = false;
  options.worker_command = {"/bin/sh", "-c", "echo stuck >&2; sleep 1000; exit 0"};
  auto repl = std::move(Repl::Create(std::move(options))).value();
  RunOptions quick;
  quick.timeout_seconds = 0.5;
  auto r = repl->Run("s", "1", quick);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->error.has_value());
  EXPECT_NE(r->error->find("did not answer before the deadline; its stderr ended with:\nstuck"),
            std::string::npos)
      << *r->error;
  EXPECT_TRUE(Children().empty());
}

// Only the end of a long stderr is kept, from a whole line.
TEST(Lifecycle, AStartUpStderrIsBoundedToItsEnd) {
  WorkerSettings settings;
  auto started = WorkerProcess::Start(
      {"/bin/sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo line $i >&2; i=$((i+1)); done; exit 1"},
      {}, settings, protocol::Clock::now() + std::chrono::seconds(60));
  ASSERT_FALSE(started.ok());
  const std::string message = started.status().message();
  EXPECT_NE(message.find("[...]\nline "), std::string::npos) << message.substr(0, 300);
  EXPECT_NE(message.find("line 1999"), std::string::npos);
  EXPECT_EQ(message.find("line 0\n"), std::string::npos);
  EXPECT_LT(message.size(), 4096u + 300u);
}

// What the worker writes before its handshake (here a toolbox printing at
// import) is forwarded to the host's stderr once it answers; what a session
// writes later goes there directly.
TEST(Lifecycle, TheWorkersStderrReachesTheHostsBeforeAndAfterItsHandshake) {
  std::string path = std::filesystem::temp_directory_path() /
                     ("dolsot-stderr-" + std::to_string(::getpid()));
  UniqueFd file(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  ASSERT_TRUE(file);
  ::unlink(path.c_str());
  UniqueFd saved(::fcntl(2, F_DUPFD_CLOEXEC, 10));
  ASSERT_EQ(::dup2(file.get(), 2), 2);
  {
    ReplOptions options;
    options.store = std::make_shared<MemoryStore>();
    options.config.typecheck = false;
    options.toolboxes["zen"] = "this";  // prints the Zen of Python when imported
    auto repl = std::move(Repl::Create(std::move(options))).value();
    auto r = repl->Run("s", "import os\nos.write(2, b'late line\\n')", {});
    EXPECT_TRUE(r.ok() && r->ok);
    ASSERT_TRUE(repl->Close().ok());
  }
  ::dup2(saved.get(), 2);
  std::string text(1 << 16, '\0');
  text.resize(static_cast<std::size_t>(std::max<ssize_t>(0, ::pread(file.get(), text.data(), text.size(), 0))));
  EXPECT_NE(text.find("The Zen of Python"), std::string::npos) << text;
  EXPECT_NE(text.find("late line"), std::string::npos) << text;
}

// A cell writes a RESULT on its own socket naming another process (here a
// process of this test, in its own group) as the runner. Before, the host
// took it, and the next timeout SIGKILLed that process group. Now the
// kernel-attested sender does not match: the call fails as corrupt, the
// session is dropped (its real processes killed), and the named process is
// never signalled.
TEST(Lifecycle, ACellThatForgesARunnerPidGetsNothingKilled) {
  pid_t victim = ::fork();
  if (victim == 0) {
    ::setpgid(0, 0);
    for (;;) ::pause();
  }
  ::setpgid(victim, victim);
  auto repl = repl_testing::MakeTestRepl(/*snapshots=*/false, CheckpointMode::kOff);
  const std::string forge =
      "import os, struct\n"
      "def s(b): return struct.pack('<I', len(b)) + b\n"
      "payload = (bytes([1, 0]) + s(b'') + bytes([0]) + struct.pack('<iII', 0, 0, 0) + bytes([0, 0])\n"
      "           + struct.pack('<I', 0)\n"  // no images
      "           + bytes([0]) + struct.pack('<III', 0, 0, " + std::to_string(victim) + ") + bytes([0]))\n"
      "frame = struct.pack('<II', 22, len(payload)) + payload\n"
      "for name in os.listdir('/proc/self/fd'):\n"
      "    try:\n"
      "        if os.readlink('/proc/self/fd/' + name).startswith('socket:'):\n"
      "            os.write(int(name), frame)\n"
      "    except OSError:\n"
      "        pass\n"
      "while True: pass\n";
  auto forged = repl->Run("s", forge, {});
  ASSERT_FALSE(forged.ok());
  EXPECT_EQ(forged.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(forged.status().message().find("the kernel says pid"), std::string::npos)
      << forged.status().message();
  RunOptions quick;
  quick.timeout_seconds = 0.5;
  auto after = repl->Run("s", "while True: pass", quick);  // a timeout kills the runner
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->exit_code, kExitTimeout);
  ASSERT_TRUE(repl->Close().ok());
  ::kill(victim, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(victim, &status, 0), victim);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;  // not SIGKILL
}

// A dolsot-worker of protocol 1 (a stale install, say) answered a refused
// HELLO with bare text. The host names the worker and the likely cause.
TEST(Lifecycle, AWorkerOfTheOldProtocolIsNamedAsSuch) {
  // Reads the HELLO frame and answers HELLO_ERROR (tag 5) with bare text.
  const std::string old_worker =
      "import os, struct\n"
      "fd = int(os.environ['" + std::string(kWorkerFdVariable) + "'])\n"
      "tag, n = struct.unpack('<II', os.read(fd, 8))\n"
      "while n > 0:\n"
      "    n -= len(os.read(fd, n))\n"
      "text = b'protocol version mismatch: host speaks 2, worker speaks 1'\n"
      "os.write(fd, struct.pack('<II', 5, len(text)) + text)\n";
  WorkerSettings settings;
  auto started = WorkerProcess::Start({"/usr/bin/env", "python3", "-c", old_worker}, {}, settings,
                                      protocol::Clock::now() + std::chrono::seconds(60));
  ASSERT_FALSE(started.ok());
  const std::string message = started.status().message();
  EXPECT_NE(message.find("the worker '/usr/bin/env' refused the handshake in another protocol"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("\"protocol version mismatch: host speaks 2, worker speaks 1\""),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("another dolsot version"), std::string::npos) << message;
}

}  // namespace
}  // namespace dolsot
