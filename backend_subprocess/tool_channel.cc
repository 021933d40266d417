// The session process's end of host tool calls (see tool_channel.h).
#include <Python.h>

#include "backend_subprocess/tool_channel.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <new>

#include "backend_subprocess/fork_guard.h"
#include "backend_subprocess/protocol.h"

namespace dolsot {
namespace {

using protocol::PayloadReader;
using protocol::PayloadWriter;
using protocol::Tag;

constexpr char kCapsuleName[] = "dolsot.ToolChannel";

// transport(name, payload) for the tool stubs.
PyObject* Transport(PyObject* capsule, PyObject* const* args, Py_ssize_t nargs) {
  auto* channel = static_cast<ToolChannel*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (channel == nullptr) return nullptr;
  if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyBytes_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "transport(name: str, payload: bytes)");
    return nullptr;
  }
  const char* name = PyUnicode_AsUTF8(args[0]);
  if (name == nullptr) return nullptr;
  std::string tool = name;
  std::string payload(PyBytes_AS_STRING(args[1]), static_cast<std::size_t>(PyBytes_GET_SIZE(args[1])));
  StatusOr<ToolReply> reply = Status(ErrorCode::kInternal, "unset");
  Py_BEGIN_ALLOW_THREADS
  reply = channel->Call(tool, payload);
  Py_END_ALLOW_THREADS
  if (!reply.ok()) {
    PyErr_Format(PyExc_ConnectionError, "tool %s(): %s", tool.c_str(),
                 reply.status().message().c_str());
    return nullptr;
  }
  PyObject* bytes = PyBytes_FromStringAndSize(reply->payload.data(),
                                              static_cast<Py_ssize_t>(reply->payload.size()));
  if (bytes == nullptr) return nullptr;
  PyObject* pair = PyTuple_Pack(2, reply->ok ? Py_True : Py_False, bytes);
  Py_DECREF(bytes);
  return pair;
}

PyMethodDef kTransportDef = {"transport", reinterpret_cast<PyCFunction>(
                                              reinterpret_cast<void (*)()>(&Transport)),
                             METH_FASTCALL, "Sends one tool call to the host and waits."};

}  // namespace

ToolChannel::ToolChannel() : wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

void ToolChannel::BeginCell(int socket) {
  std::lock_guard<std::mutex> lock(mutex_);
  socket_ = socket;
  open_ = true;
}

void ToolChannel::AfterFork() {
  // The parent's other threads are gone: nobody holds or waits on these.
  new (&write_mutex_) std::mutex();
  new (&mutex_) std::mutex();
  new (&changed_) std::condition_variable();
  open_ = false;
  reading_ = false;
  waiting_.clear();
}

void ToolChannel::EndCell() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!open_ && !reading_ && waiting_.empty()) return;
  open_ = false;
  if (reading_ && wake_) {
    std::uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
  }
  changed_.wait(lock, [&] { return !reading_; });
  if (wake_) {
    std::uint64_t drained;
    (void)!::read(wake_.get(), &drained, sizeof drained);
  }
  changed_.notify_all();
  lock.unlock();
  // A writer that saw the channel open has finished its frame.
  std::lock_guard<std::mutex> writing(write_mutex_);
}

StatusOr<ToolReply> ToolChannel::Call(const std::string& name, const std::string& arguments) {
  if (fork_guard::InCellChild()) {
    return Status(ErrorCode::kUnavailable,
                  "host tools cannot be called from a process the cell forked");
  }
  std::uint64_t id;
  {
    std::lock_guard<std::mutex> writing(write_mutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!open_) {
        return Status(ErrorCode::kUnavailable,
                      "host tools can be called only while a cell runs (the cell has ended)");
      }
      id = next_id_++;
      waiting_[id];
    }
    PayloadWriter w;
    w.U64(id).Str(name).Str(arguments);
    Status sent = protocol::WriteFrame(socket_, Tag::kToolCall, w.data());
    if (!sent.ok()) {
      std::lock_guard<std::mutex> lock(mutex_);
      waiting_.erase(id);
      return Status(ErrorCode::kUnavailable, "the host is gone: " + sent.message());
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    auto it = waiting_.find(id);
    if (it->second) {
      ToolReply reply = std::move(*it->second);
      waiting_.erase(it);
      return reply;
    }
    if (!open_) {
      waiting_.erase(it);
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
  lock.unlock();
  pollfd fds[2] = {{socket_, POLLIN, 0}, {wake_.get(), POLLIN, 0}};
  int ready = ::poll(fds, wake_ ? 2 : 1, -1);
  std::optional<std::pair<std::uint64_t, ToolReply>> routed;
  bool broken = false;
  if (ready > 0 && fds[0].revents != 0 && !(wake_ && fds[1].revents != 0)) {
    auto frame = protocol::ReadFrame(socket_);
    if (!frame.ok()) {
      broken = true;
    } else if (frame->tag == Tag::kToolReply) {
      PayloadReader r(frame->payload);
      std::uint64_t id = r.U64();
      ToolReply reply;
      reply.ok = r.U8() != 0;
      reply.payload = r.Str();
      if (r.Finish("TOOL_REPLY").ok()) routed.emplace(id, std::move(reply));
    }
  } else if (ready < 0 && errno != EINTR) {
    broken = true;
  }
  lock.lock();
  reading_ = false;
  if (routed) {
    auto it = waiting_.find(routed->first);
    if (it != waiting_.end()) it->second = std::move(routed->second);
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
