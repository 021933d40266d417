// The host's C functions answering a Repl cell's tool calls (see
// tool_calls_from_python.h).
#include "bindings/tool_calls_from_python.h"

#include <memory>
#include <optional>
#include <string>

#include "core/pickle_budget.h"
#include "core/pipe_signal.h"

namespace dolsot::bindings {
namespace {

constexpr char kReplyCapsule[] = "dolsot.ToolReplyFn";
constexpr char kPipesCapsule[] = "dolsot.ToolCallPipe";

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

PyObject* PipesReply(PyObject* capsule, PyObject* const* args, Py_ssize_t nargs) {
  auto* host = static_cast<ToolCallPipe*>(PyCapsule_GetPointer(capsule, kPipesCapsule));
  if (host == nullptr) return nullptr;
  ToolReply reply;
  if (!ParseReply(args, nargs, "reply", &reply)) return nullptr;
  Py_BEGIN_ALLOW_THREADS
  (void)host->Reply(reply);  // a cell that is over drops it
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}


// The bytes of `data` (bytes), copied into a reply.
ToolReply ReplyOf(bool ok, PyObject* data) {
  return ToolReply{ok, std::string(PyBytes_AS_STRING(data),
                                   static_cast<std::size_t>(PyBytes_GET_SIZE(data)))};
}

// What the fast path needs from the host, looked up once per served cell.
struct ServeScope {
  PyObject* host;       // the ToolHost (borrowed: the caller's argument)
  PyObject* names;      // the cell's tool names, a frozenset (borrowed)
  PyObject* reply;      // reply(ok, payload), for the Python paths
  PyObject* loads = nullptr;
  PyObject* dumps = nullptr;
  PyObject* protocol = nullptr;  // 5
  PyObject* unpickling_error = nullptr;  // pickle.UnpicklingError
  PyObject* error_reply = nullptr;  // dolsot._tools._error_reply
  // The fast path's answer, sent by the loop without the GIL together with
  // the next receive (one release of the GIL a call, not two).
  std::optional<ToolReply> pending;
  ~ServeScope() {
    Py_XDECREF(loads);
    Py_XDECREF(dumps);
    Py_XDECREF(protocol);
    Py_XDECREF(error_reply);
    Py_XDECREF(unpickling_error);
  }
};

// Answers a call that failed with the error set: the exception as the
// host's _error_reply describes it. False when even that failed (the
// serving ends, as the Python loop's did).
bool ReplyError(ServeScope& scope) {
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  if (trace != nullptr && value != nullptr) PyException_SetTraceback(value, trace);
  PyObject* data = value == nullptr ? nullptr : PyObject_CallOneArg(scope.error_reply, value);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  if (data != nullptr && !PyBytes_Check(data)) {
    Py_CLEAR(data);
    PyErr_SetString(PyExc_TypeError, "_error_reply did not return bytes");
  }
  if (data == nullptr) return false;
  ToolReply reply = ReplyOf(false, data);
  Py_DECREF(data);
  scope.pending = std::move(reply);
  return true;
}

// Answers a call with what its tool returned (`value`, a new reference, or
// nullptr with the tool's error set): 1 when answered, -1 on a failure to
// answer.
int Answer(ServeScope& scope, PyObject* name, PyObject* value) {
  if (value == nullptr) return ReplyError(scope) ? 1 : -1;
  if (value == Py_None) {
    Py_DECREF(value);
    scope.pending = ToolReply{true, std::string(kNonePickle)};  // no pickle.dumps
    return 1;
  }
  PyTypeObject* kind = Py_TYPE(value);
  const bool awaitable = (kind->tp_as_async != nullptr && kind->tp_as_async->am_await != nullptr) ||
                         PyGen_Check(value);
  PyObject* data = awaitable ? nullptr : PyObject_CallFunctionObjArgs(scope.dumps, value,
                                                                      scope.protocol, nullptr);
  if (data == nullptr || !PyBytes_Check(data)) {
    // Awaited, or its pickling error described, by the host's Python.
    Py_XDECREF(data);
    PyErr_Clear();
    PyObject* answered =
        PyObject_CallMethod(scope.host, "_answer", "OOO", name, value, scope.reply);
    Py_DECREF(value);
    if (answered == nullptr) return ReplyError(scope) ? 1 : -1;
    Py_DECREF(answered);
    return 1;
  }
  Py_DECREF(value);
  ToolReply reply = ReplyOf(true, data);
  Py_DECREF(data);
  scope.pending = std::move(reply);
  return 1;
}

// Runs one call the fast way when it can: `tool` is a plain synchronous
// callable (it returns no awaitable), the arguments are a plain pickle (or
// the host trusts the session: unpickle="full") of an (args, kwargs) pair,
// and the result pickles. Returns 1 when answered, 0 to hand the call to
// the host's Python (host._call: nothing of it ran yet), or -1 on a
// failure to answer.
int ServeFast(ServeScope& scope, PyObject* name, PyObject* tool,
              const ToolCall& call, bool trusted, std::uint64_t budget) {
  if (call.arguments == kNoArgumentsPickle) {
    // No arguments (the stub's constant): nothing to unpickle.
    return Answer(scope, name, PyObject_CallNoArgs(tool));
  }
  if (!trusted) {
    // Walked within the host's budget before anything is built.
    StatusOr<PickleShape> shape = WalkPickle(call.arguments, budget);
    if (!shape.ok()) {
      PyErr_Format(scope.unpickling_error, "tool %U(): %s", name,
                   shape.status().message().c_str());
      return ReplyError(scope) ? 1 : -1;
    }
    if (*shape != PickleShape::kPlain) return 0;  // the allow-list decodes it
  }
  PyObject* view = PyMemoryView_FromMemory(const_cast<char*>(call.arguments.data()),
                                           static_cast<Py_ssize_t>(call.arguments.size()),
                                           PyBUF_READ);
  if (view == nullptr) return -1;
  PyObject* decoded = PyObject_CallOneArg(scope.loads, view);
  Py_DECREF(view);
  if (decoded == nullptr) {
    if (PyErr_ExceptionMatches(scope.unpickling_error)) {
      // As host._call says it: the tool's name, then pickle's message.
      PyObject *type, *value, *trace;
      PyErr_Fetch(&type, &value, &trace);
      PyErr_NormalizeException(&type, &value, &trace);
      PyObject* text = value == nullptr ? nullptr : PyObject_Str(value);
      if (text != nullptr) {
        PyErr_Format(scope.unpickling_error, "tool %U(): %U", name, text);
        Py_DECREF(text);
      }
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(trace);
    }
    return ReplyError(scope) ? 1 : -1;
  }
  if (!PyTuple_CheckExact(decoded) || PyTuple_GET_SIZE(decoded) != 2 ||
      !PyTuple_CheckExact(PyTuple_GET_ITEM(decoded, 0)) ||
      !PyDict_CheckExact(PyTuple_GET_ITEM(decoded, 1))) {
    Py_DECREF(decoded);
    PyErr_Format(PyExc_TypeError, "tool %U(): the call's arguments are not an (args, kwargs) pair",
                 name);
    return ReplyError(scope) ? 1 : -1;
  }
  PyObject* kwargs = PyTuple_GET_ITEM(decoded, 1);
  PyObject* value = PyObject_Call(tool, PyTuple_GET_ITEM(decoded, 0),
                                  PyDict_GET_SIZE(kwargs) == 0 ? nullptr : kwargs);
  Py_DECREF(decoded);
  return Answer(scope, name, value);
}

// serve(host, names): answers the cell's calls until the cell is over. Each
// call is received and answered without the GIL; the GIL is taken once in
// between, for the tool. A call the fast path cannot take goes to
// host._call(name, payload, reply), as before.
PyObject* PipesServe(PyObject* capsule, PyObject* const* args, Py_ssize_t nargs) {
  auto* pipes = static_cast<ToolCallPipe*>(PyCapsule_GetPointer(capsule, kPipesCapsule));
  if (pipes == nullptr) return nullptr;
  if (nargs != 3 || !PyFrozenSet_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "serve(host, names: frozenset, reply)");
    return nullptr;
  }
  ServeScope scope{args[0], args[1], args[2]};
  PyObject* pickle = PyImport_ImportModule("pickle");
  if (pickle == nullptr) return nullptr;
  scope.loads = PyObject_GetAttrString(pickle, "loads");
  scope.dumps = PyObject_GetAttrString(pickle, "dumps");
  scope.unpickling_error = PyObject_GetAttrString(pickle, "UnpicklingError");
  Py_DECREF(pickle);
  PyObject* tools_module = PyImport_ImportModule("dolsot._tools");
  if (tools_module != nullptr) {
    scope.error_reply = PyObject_GetAttrString(tools_module, "_error_reply");
    Py_DECREF(tools_module);
  }
  scope.protocol = PyLong_FromLong(5);
  // The replies' writes raise no SIGPIPE, whatever the host's Python did
  // with it: blocked on this thread while it serves (not per reply).
  ScopedPipeSignalBlock no_pipe_signal;
  if (scope.loads == nullptr || scope.dumps == nullptr || scope.error_reply == nullptr ||
      scope.protocol == nullptr || scope.unpickling_error == nullptr) {
    return nullptr;
  }
  for (;;) {
    std::optional<ToolCall> call;
    std::optional<ToolReply> reply = std::move(scope.pending);
    scope.pending.reset();
    Py_BEGIN_ALLOW_THREADS
    if (reply) (void)pipes->Reply(*reply);  // a cell that is over drops it
    call = pipes->Receive();
    Py_END_ALLOW_THREADS
    if (!call) Py_RETURN_NONE;
    // The name came from the cell: one that is not UTF-8 names no tool.
    PyObject* name = PyUnicode_DecodeUTF8(call->name.data(),
                                          static_cast<Py_ssize_t>(call->name.size()), "replace");
    if (name == nullptr) return nullptr;
    int known = PySet_Contains(scope.names, name);
    // Read on every call: host.tools and host.unpickle are the host's to change.
    PyObject* tools = known == 1 ? PyObject_GetAttrString(scope.host, "tools") : nullptr;
    // Not a dict any more (the host's code swapped it): the Python path looks it up.
    const bool looked_up = tools != nullptr && PyDict_CheckExact(tools);
    PyObject* tool = looked_up ? PyDict_GetItemWithError(tools, name) : nullptr;  // borrowed
    Py_XINCREF(tool);
    Py_XDECREF(tools);
    if (known < 0 || PyErr_Occurred()) {
      Py_XDECREF(tool);
      Py_DECREF(name);
      return nullptr;
    }
    int served = 0;
    if (known == 1 && !looked_up) {
      served = 0;
    } else if (known == 1 && tool == nullptr) {
      scope.pending = ToolReply{false, std::string()};  // the session reports it unavailable
      served = 1;
    } else if (known == 1) {
      PyObject* policy = PyObject_GetAttrString(scope.host, "unpickle");
      // Trusted only when it says "full": anything else decodes as hostile.
      const bool trusted = policy != nullptr && PyUnicode_Check(policy) &&
                           PyUnicode_CompareWithASCIIString(policy, "full") == 0;
      Py_XDECREF(policy);
      // The host's budget (bytes); anything but an int: the default.
      PyObject* limit = policy == nullptr ? nullptr
                                          : PyObject_GetAttrString(scope.host, "max_unpickle_bytes");
      std::uint64_t budget = kDefaultPickleBudget;
      if (limit != nullptr && PyLong_Check(limit)) {
        const unsigned long long value = PyLong_AsUnsignedLongLong(limit);
        if (PyErr_Occurred()) PyErr_Clear();
        else budget = value;
      }
      Py_XDECREF(limit);
      served = limit == nullptr ? -1 : ServeFast(scope, name, tool, *call, trusted, budget);
    } else {
      scope.pending = ToolReply{false, std::string()};
      served = 1;
    }
    Py_XDECREF(tool);
    if (served == 0) {
      PyObject* payload = PyBytes_FromStringAndSize(
          call->arguments.data(), static_cast<Py_ssize_t>(call->arguments.size()));
      PyObject* done = payload == nullptr ? nullptr
                                          : PyObject_CallMethod(scope.host, "_call", "OOO", name,
                                                                payload, scope.reply);
      Py_XDECREF(payload);
      served = done == nullptr ? -1 : 1;
      Py_XDECREF(done);
    }
    Py_DECREF(name);
    if (served < 0) return nullptr;
  }
}

PyMethodDef kReplyDoneDef = {
    "done", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&ReplyDone)),
    METH_FASTCALL, "Sends a tool's reply to the cell that called it."};
PyMethodDef kServeDef = {
    "serve", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&PipesServe)),
    METH_FASTCALL, "Answers the cell's tool calls until the cell is over."};
PyMethodDef kReplyDef = {
    "reply", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&PipesReply)),
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

bool NewToolPipesFunctions(std::unique_ptr<ToolCallPipe> pipe, PyObject** serve,
                           PyObject** reply) {
  *serve = *reply = nullptr;
  PyObject* capsule = PyCapsule_New(pipe.get(), kPipesCapsule, [](PyObject* c) {
    delete static_cast<ToolCallPipe*>(PyCapsule_GetPointer(c, kPipesCapsule));
  });
  if (capsule == nullptr) return false;
  pipe.release();  // the capsule's now
  *serve = PyCFunction_New(&kServeDef, capsule);
  *reply = *serve == nullptr ? nullptr : PyCFunction_New(&kReplyDef, capsule);
  Py_DECREF(capsule);
  if (*reply == nullptr) {
    Py_CLEAR(*serve);
    return false;
  }
  return true;
}

}  // namespace dolsot::bindings
