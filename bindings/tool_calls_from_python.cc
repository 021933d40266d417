// The host's C functions answering a Repl cell's tool calls (see
// tool_calls_from_python.h).
#include "bindings/tool_calls_from_python.h"

#include <memory>
#include <optional>
#include <string>

#include "backend_subprocess/tool_socket.h"

namespace dolsot::bindings {
namespace {

constexpr char kReplyCapsule[] = "dolsot.ToolReplyFn";
constexpr char kSocketCapsule[] = "dolsot.ToolSocketHost";

// The (ok, payload) arguments of done() and reply(), or false with an error set.
bool ParseReply(PyObject* const* args, Py_ssize_t nargs, const char* signature, ToolReply* reply) {
  if (nargs != 2 || !PyBytes_Check(args[1])) {
    PyErr_Format(PyExc_TypeError, "%s(ok: bool, payload: bytes)", signature);
    return false;
  }
  int ok = PyObject_IsTrue(args[0]);
  if (ok < 0) return false;
  reply->ok = ok == 1;
  reply->payload.assign(PyBytes_AS_STRING(args[1]), static_cast<std::size_t>(PyBytes_GET_SIZE(args[1])));
  return true;
}

PyObject* ReplyDone(PyObject* capsule, PyObject* const* args, Py_ssize_t nargs) {
  auto* done = static_cast<ToolReplyFn*>(PyCapsule_GetPointer(capsule, kReplyCapsule));
  if (done == nullptr) return nullptr;
  ToolReply reply;
  if (!ParseReply(args, nargs, "done", &reply)) return nullptr;
  Py_BEGIN_ALLOW_THREADS  // the write to the runner needs no GIL
  (*done)(std::move(reply));
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

PyObject* SocketReceive(PyObject* capsule, PyObject* const*, Py_ssize_t nargs) {
  auto* host = static_cast<ToolSocketHost*>(PyCapsule_GetPointer(capsule, kSocketCapsule));
  if (host == nullptr) return nullptr;
  if (nargs != 0) {
    PyErr_SetString(PyExc_TypeError, "receive() takes no arguments");
    return nullptr;
  }
  std::optional<ToolCall> call;
  Py_BEGIN_ALLOW_THREADS
  call = host->Receive();
  Py_END_ALLOW_THREADS
  if (!call) Py_RETURN_NONE;
  // The name came from the cell: one that is not UTF-8 names no tool.
  PyObject* name = PyUnicode_DecodeUTF8(call->name.data(),
                                        static_cast<Py_ssize_t>(call->name.size()), "replace");
  PyObject* payload = name == nullptr ? nullptr
                                      : PyBytes_FromStringAndSize(
                                            call->arguments.data(),
                                            static_cast<Py_ssize_t>(call->arguments.size()));
  PyObject* pair = payload == nullptr ? nullptr : PyTuple_Pack(2, name, payload);
  Py_XDECREF(name);
  Py_XDECREF(payload);
  return pair;
}

PyObject* SocketReply(PyObject* capsule, PyObject* const* args, Py_ssize_t nargs) {
  auto* host = static_cast<ToolSocketHost*>(PyCapsule_GetPointer(capsule, kSocketCapsule));
  if (host == nullptr) return nullptr;
  ToolReply reply;
  if (!ParseReply(args, nargs, "reply", &reply)) return nullptr;
  Py_BEGIN_ALLOW_THREADS
  (void)host->Reply(reply);  // a cell that is over drops it
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

PyMethodDef kReplyDoneDef = {
    "done", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&ReplyDone)),
    METH_FASTCALL, "Sends a tool's reply to the cell that called it."};
PyMethodDef kReceiveDef = {
    "receive", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&SocketReceive)),
    METH_FASTCALL, "The cell's next tool call (name, payload), or None once the cell is over."};
PyMethodDef kReplyDef = {
    "reply", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&SocketReply)),
    METH_FASTCALL, "Answers the tool call received last."};

}  // namespace

PyObject* NewReplyFunction(ToolReplyFn fn) {
  PyObject* capsule = PyCapsule_New(new ToolReplyFn(std::move(fn)), kReplyCapsule, [](PyObject* c) {
    delete static_cast<ToolReplyFn*>(PyCapsule_GetPointer(c, kReplyCapsule));
  });
  if (capsule == nullptr) return nullptr;
  PyObject* function = PyCFunction_New(&kReplyDoneDef, capsule);
  Py_DECREF(capsule);
  return function;
}

bool NewToolSocketFunctions(UniqueFd socket, PyObject** receive, PyObject** reply) {
  *receive = *reply = nullptr;
  auto host = std::make_unique<ToolSocketHost>(std::move(socket));
  PyObject* capsule = PyCapsule_New(host.get(), kSocketCapsule, [](PyObject* c) {
    delete static_cast<ToolSocketHost*>(PyCapsule_GetPointer(c, kSocketCapsule));
  });
  if (capsule == nullptr) return false;
  host.release();  // the capsule's now
  *receive = PyCFunction_New(&kReceiveDef, capsule);
  *reply = *receive == nullptr ? nullptr : PyCFunction_New(&kReplyDef, capsule);
  Py_DECREF(capsule);
  if (*reply == nullptr) {
    Py_CLEAR(*receive);
    return false;
  }
  return true;
}

}  // namespace dolsot::bindings
