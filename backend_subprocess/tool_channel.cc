// The session process's end of host tool calls (see tool_channel.h).
#include <Python.h>

#include "backend_subprocess/tool_channel.h"

#include "backend_subprocess/socket_sink.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string_view>

#include "backend_subprocess/protocol.h"
#include "core/pickle_budget.h"
#include "embedded/cell_tools.h"
#include "embedded/plain_values.h"
#include "embedded/read_only_cell.h"

namespace dolsot {
namespace {

using protocol::Tag;

constexpr char kCapsuleName[] = "dolsot.ToolChannel";

// A call without arguments sends kNoArgumentsPickle (core/cell_inputs.h),
// made without pickle.dumps; a reply of kNonePickle is decoded without
// pickle.loads.
constexpr std::string_view kNoArguments = kNoArgumentsPickle;
constexpr std::string_view kNone = kNonePickle;

// pickle.dumps and pickle.loads, looked up once (the session process has one
// interpreter, and the channel lives as long as it). A cell may have put
// functions of its own there first: see IsPickleFunction (embedded/cell_tools.h).
PyObject* g_dumps = nullptr;
PyObject* g_loads = nullptr;

bool LookUpPickleFunctions() {
  PyObject* pickle = PyImport_ImportModule("pickle");
  if (pickle == nullptr) return false;
  PyObject* d = PyObject_GetAttrString(pickle, "dumps");
  PyObject* l = d == nullptr ? nullptr : PyObject_GetAttrString(pickle, "loads");
  Py_DECREF(pickle);
  if (l == nullptr) {
    Py_XDECREF(d);
    return false;
  }
  g_dumps = d;
  g_loads = l;
  return true;
}

// Needs the GIL.
bool PickleFunctions(PyObject** dumps, PyObject** loads) {
  if (g_dumps == nullptr && !LookUpPickleFunctions()) return false;
  *dumps = g_dumps;
  *loads = g_loads;
  return true;
}

// Within a proven cell (embedded/read_only_cell.h), a call whose arguments
// or reply are not plain data runs code, or makes objects, the proof did
// not see: the cell takes the general path after all.
constexpr int kMaxProvenArgumentItems = 4096;
bool ProvenArguments(PyObject* args, PyObject* kwargs) {
  int budget = kMaxProvenArgumentItems;
  return IsPickleFunction(g_dumps, "dumps") && PicklesByItself(args, &budget) &&
         PicklesByItself(kwargs, &budget);
}

// transport(name, args, kwargs, failed) for the tool stubs
// (embedded/cell_tools.cc): pickles (args, kwargs), sends the call, waits
// without the GIL and returns the unpickled result. Every other outcome
// returns failed(args, kwargs, error, reply), which raises: `error` the
// exception pickling the arguments raised (reply None), else `reply` the
// host's bytes (b"": the tool is not available; else the exception).
PyObject* Transport(PyObject* capsule, PyObject* const* args, Py_ssize_t nargs) {
  auto* channel = static_cast<ToolChannel*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (channel == nullptr) return nullptr;
  if (nargs != 4 || !PyUnicode_Check(args[0]) || !PyTuple_Check(args[1]) ||
      !PyDict_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError,
                    "transport(name: str, args: tuple, kwargs: dict, failed: callable)");
    return nullptr;
  }
  PyObject* failed = args[3];
  Py_ssize_t name_size = 0;
  const char* name = PyUnicode_AsUTF8AndSize(args[0], &name_size);
  if (name == nullptr) return nullptr;
  PyObject *dumps, *loads;
  if (!PickleFunctions(&dumps, &loads)) return nullptr;
  const bool proving = ReadOnlyCell::Proving();
  if (proving && !ProvenArguments(args[1], args[2])) ReadOnlyCell::Unproven();
  PyObject* pickled = nullptr;  // the arguments' pickle, unless there are none
  std::string_view payload = kNoArguments;
  if (PyTuple_GET_SIZE(args[1]) != 0 || PyDict_GET_SIZE(args[2]) != 0) {
    PyObject* call = PyTuple_Pack(2, args[1], args[2]);
    if (call == nullptr) return nullptr;
    PyObject* protocol = PyLong_FromLong(5);
    pickled = protocol == nullptr ? nullptr
                                  : PyObject_CallFunctionObjArgs(dumps, call, protocol, nullptr);
    Py_XDECREF(protocol);
    Py_DECREF(call);
    if (pickled == nullptr || !PyBytes_Check(pickled)) {
      if (pickled != nullptr) {
        Py_CLEAR(pickled);
        PyErr_SetString(PyExc_TypeError, "pickle.dumps did not return bytes");
      }
      PyObject *type, *error, *trace;
      PyErr_Fetch(&type, &error, &trace);
      PyErr_NormalizeException(&type, &error, &trace);
      PyObject* raised = PyObject_CallFunctionObjArgs(failed, args[1], args[2],
                                                      error != nullptr ? error : Py_None,
                                                      Py_None, nullptr);
      Py_XDECREF(type);
      Py_XDECREF(error);
      Py_XDECREF(trace);
      return raised;
    }
    payload = std::string_view(PyBytes_AS_STRING(pickled),
                               static_cast<std::size_t>(PyBytes_GET_SIZE(pickled)));
  }
  const std::string_view tool(name, static_cast<std::size_t>(name_size));
  StatusOr<ToolReply> reply = Status(ErrorCode::kInternal, "unset");
  Py_BEGIN_ALLOW_THREADS
  reply = channel->Call(tool, payload);  // `pickled` and the name stay alive meanwhile
  Py_END_ALLOW_THREADS
  Py_XDECREF(pickled);
  if (!reply.ok()) {
    if (proving) ReadOnlyCell::Unproven();
    PyErr_Format(PyExc_ConnectionError, "tool %s(): %s", name, reply.status().message().c_str());
    return nullptr;
  }
  if (reply->ok && reply->payload == kNone) Py_RETURN_NONE;
  // A reply that names nothing builds plain values with _pickle's loads;
  // an exception, or anything else, may run code when it is read.
  if (proving && !(reply->ok && IsPickleFunction(loads, "loads") && IsPlainPickle(reply->payload))) {
    ReadOnlyCell::Unproven();
  }
  PyObject* bytes = PyBytes_FromStringAndSize(reply->payload.data(),
                                              static_cast<Py_ssize_t>(reply->payload.size()));
  if (bytes == nullptr) return nullptr;
  PyObject* out = reply->ok ? PyObject_CallOneArg(loads, bytes)
                            : PyObject_CallFunctionObjArgs(failed, args[1], args[2], Py_None,
                                                           bytes, nullptr);
  Py_DECREF(bytes);
  return out;
}

PyMethodDef kTransportDef = {"transport", reinterpret_cast<PyCFunction>(
                                              reinterpret_cast<void (*)()>(&Transport)),
                             METH_FASTCALL, "Sends one tool call to the host and waits."};

}  // namespace

ToolChannel::ToolChannel() : wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

void ToolChannel::BeginCell(int socket, bool tool_pipes) {
  std::lock_guard<std::mutex> lock(mutex_);
  socket_ = socket;
  open_ = true;
  tool_pipes_served_ = tool_pipes;
  pipe_signal_ignored_ = tool_pipes && PipeSignalIgnored();
  tool_pipes_failed_ = false;
  tool_pipes_call_ = 0;
}

void ToolChannel::AfterFork() {
  // The parent's other threads are gone: nobody holds or waits on these.
  new (&write_mutex_) std::mutex();
  new (&mutex_) std::mutex();
  new (&changed_) std::condition_variable();
  open_ = false;
  reading_ = false;
  tool_calls_.Reset();
  tool_replies_.Reset();
  tool_reader_ = protocol::BufferedFrameReader();
  tool_pipes_call_ = 0;
  waiting_.clear();
}

void ToolChannel::Wake() {
  if (!wake_) return;
  std::uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

void ToolChannel::SendOutputFirst(SocketSink* sink) {
  std::lock_guard<std::mutex> writing(write_mutex_);
  output_first_ = sink;
}

void ToolChannel::EndCell() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!open_ && !reading_ && waiting_.empty() && !tool_calls_ && !tool_replies_) return;
  open_ = false;
  if (reading_) Wake();
  changed_.wait(lock, [&] { return !reading_; });
  if (wake_) {
    std::uint64_t drained;
    (void)!::read(wake_.get(), &drained, sizeof drained);
  }
  changed_.notify_all();
  lock.unlock();
  // A writer that saw the channel open has finished its frame; then nobody
  // uses the tool pipes any more (the host's ends see them close).
  std::lock_guard<std::mutex> writing(write_mutex_);
  lock.lock();
  tool_calls_.Reset();
  tool_replies_.Reset();
  tool_reader_ = protocol::BufferedFrameReader();
  tool_pipes_call_ = 0;
}

Status ToolChannel::OpenToolPipes() {
  int calls[2], replies[2];
  if (::pipe2(calls, O_CLOEXEC) != 0) return Status(ErrorCode::kIo, "pipe2 for tool calls failed");
  UniqueFd calls_read(calls[0]), calls_write(calls[1]);
  if (::pipe2(replies, O_CLOEXEC) != 0) {
    return Status(ErrorCode::kIo, "pipe2 for tool replies failed");
  }
  UniqueFd replies_read(replies[0]), replies_write(replies[1]);
  // No end may leak into a process a cell forks meanwhile.
  auto my_calls = fork_guard::GuardedFd::Create(std::move(calls_write));
  if (!my_calls.ok()) return my_calls.status();
  auto my_replies = fork_guard::GuardedFd::Create(std::move(replies_read));
  if (!my_replies.ok()) return my_replies.status();
  auto hosts_calls = fork_guard::GuardedFd::Create(std::move(calls_read));
  if (!hosts_calls.ok()) return hosts_calls.status();
  auto hosts_replies = fork_guard::GuardedFd::Create(std::move(replies_write));
  if (!hosts_replies.ok()) return hosts_replies.status();
  // The host's ends go to the host and are closed here (with the guards).
  DOLSOT_RETURN_IF_ERROR(protocol::WriteFrame(socket_, Tag::kToolPipes, {}, hosts_calls->get(),
                                              hosts_replies->get()));
  std::lock_guard<std::mutex> lock(mutex_);
  tool_calls_ = std::move(my_calls).value();
  tool_replies_ = std::move(my_replies).value();
  // A thread already reading polls without them: it starts again with them.
  if (reading_) Wake();
  return Status::Ok();
}

StatusOr<ToolReply> ToolChannel::Call(std::string_view name, std::string_view arguments) {
  if (fork_guard::InCellChild()) {
    return Status(ErrorCode::kUnavailable,
                  "host tools cannot be called from a process the cell forked");
  }
  std::uint64_t id;
  {
    // Held while this thread chooses where to write and writes: the tool
    // pipes are made, written and closed (EndCell) only under it.
    std::lock_guard<std::mutex> writing(write_mutex_);
    if (output_first_ != nullptr) output_first_->SendWaiting();
    bool own_pipes;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!open_) {
        return Status(ErrorCode::kUnavailable,
                      "host tools can be called only while a cell runs (the cell has ended)");
      }
      id = next_id_++;
      waiting_[id];
      own_pipes = tool_pipes_served_ && !tool_pipes_failed_ && tool_pipes_call_ == 0;
    }
    if (own_pipes && !tool_calls_) {
      Status opened = OpenToolPipes();
      if (!opened.ok()) {
        std::lock_guard<std::mutex> lock(mutex_);
        tool_pipes_failed_ = true;  // this cell's calls take the runner's socket
        own_pipes = false;
      }
    }
    int target = socket_;
    if (own_pipes) {
      std::lock_guard<std::mutex> lock(mutex_);
      tool_pipes_call_ = id;
      target = tool_calls_.get();
    }
    const std::string payload = protocol::ToolCallPayload(id, name, arguments);
    if (own_pipes &&
        !protocol::WritePipeFrame(target, Tag::kToolCall, payload, -1, pipe_signal_ignored_)
             .ok()) {
      // The host stopped serving them (the cell wrote there itself, or
      // closed them): this call and the cell's later ones take the runner's
      // socket.
      std::lock_guard<std::mutex> lock(mutex_);
      tool_pipes_call_ = 0;
      tool_pipes_failed_ = true;
      own_pipes = false;
      target = socket_;
    }
    Status sent = own_pipes ? Status::Ok() : protocol::WriteFrame(target, Tag::kToolCall, payload);
    if (!sent.ok()) {
      std::lock_guard<std::mutex> lock(mutex_);
      waiting_.erase(id);
      return Status(ErrorCode::kUnavailable, "the host is gone: " + sent.message());
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  // A thread reading only the tool pipes reads the runner's socket from its
  // next wait on: this call's reply comes there.
  if (reading_ && !reading_runner_ && id != tool_pipes_call_) Wake();
  for (;;) {
    auto it = waiting_.find(id);
    if (it->second) {
      StatusOr<ToolReply> reply = std::move(*it->second);
      waiting_.erase(it);
      return reply;
    }
    if (!open_) {
      waiting_.erase(it);
      if (tool_pipes_call_ == id) tool_pipes_call_ = 0;
      return Status(ErrorCode::kUnavailable, "the cell ended before the host answered");
    }
    if (!reading_) {
      ReadOne(lock);
    } else {
      changed_.wait(lock);
    }
  }
}

void ToolChannel::ReadOne(std::unique_lock<std::mutex>& lock) {
  reading_ = true;
  // Stays open until EndCell, which waits for this read to end.
  const int own = tool_replies_ && !tool_pipes_failed_ ? tool_replies_.get() : -1;
  // Only the tool pipes' call waits: the runner's socket has nothing for it
  // (a host that is gone closes the reply pipe too), and one descriptor
  // less makes the wait cheaper. A call that goes there meanwhile wakes it.
  reading_runner_ = own < 0 || tool_pipes_call_ == 0 || waiting_.size() > 1;
  const bool runner = reading_runner_;
  lock.unlock();
  pollfd fds[3];
  nfds_t count = 0;
  const nfds_t runner_at = runner ? count : 3;
  if (runner) fds[count++] = {socket_, POLLIN, 0};
  const nfds_t own_at = own >= 0 ? count : 3;
  if (own >= 0) fds[count++] = {own, POLLIN, 0};
  const nfds_t wake_at = wake_ ? count : 3;
  if (wake_) fds[count++] = {wake_.get(), POLLIN, 0};
  SpinningPoll wait(reply_budget_);
  // A reply that came with the last one is read without a wait.
  const bool buffered = own >= 0 && tool_reader_.pending();
  int ready = buffered ? 1 : wait.Wait(fds, count, -1);
  if (buffered) {
    for (nfds_t i = 0; i < count; ++i) fds[i].revents = i == own_at ? POLLIN : 0;
  }
  std::optional<protocol::ToolReplyMessage> routed;
  bool broken = false;    // the runner's socket: the host is gone
  bool own_lost = false;  // the tool pipes: the host stopped serving them
  if (ready > 0 && wake_at != 3 && fds[wake_at].revents != 0) {
    // EndCell, or tool pipes opened since this read began: look again.
    std::uint64_t drained;
    (void)!::read(wake_.get(), &drained, sizeof drained);
  } else if (ready > 0) {
    const bool from_own =
        own_at != 3 && fds[own_at].revents != 0 && (runner_at == 3 || fds[runner_at].revents == 0);
    auto frame = from_own ? tool_reader_.Read(own) : protocol::ReadFrame(socket_);
    if (!frame.ok()) {
      (from_own ? own_lost : broken) = true;
    } else if (frame->tag == Tag::kToolReply) {
      auto reply = protocol::ReadToolReply(frame->payload);
      if (reply.ok()) {
        if (!buffered) wait.Learn(reply->sent_at);
        routed = std::move(reply).value();
      }
    }
  } else if (ready < 0 && errno != EINTR) {
    broken = true;
  }
  lock.lock();
  reading_ = false;
  if (routed) {
    auto it = waiting_.find(routed->id);
    if (it != waiting_.end() && !it->second) it->second.emplace(std::move(routed->reply));
    if (routed->id == tool_pipes_call_) tool_pipes_call_ = 0;
  }
  if (own_lost) {
    // Its call fails; the cell's later calls take the runner's socket.
    tool_pipes_failed_ = true;
    auto it = waiting_.find(tool_pipes_call_);
    if (tool_pipes_call_ != 0 && it != waiting_.end() && !it->second) {
      it->second.emplace(Status(ErrorCode::kUnavailable,
                                "the host stopped serving the cell's tool pipes"));
    }
    tool_pipes_call_ = 0;
  }
  if (broken) open_ = false;  // the host is gone: every waiter fails
  changed_.notify_all();
}

PyObject* ToolChannel::NewTransport() {
  PyObject* capsule = PyCapsule_New(this, kCapsuleName, nullptr);
  if (capsule == nullptr) return nullptr;
  PyObject* function = PyCFunction_New(&kTransportDef, capsule);
  Py_DECREF(capsule);
  return function;
}

}  // namespace dolsot
