// Whether a pickle builds only plain data (see plain_pickle.h).
#include "bindings/plain_pickle.h"

#include <cstdint>

namespace dolsot::bindings {
namespace {

// How an opcode's argument is laid out.
enum class Arg : std::uint8_t {
  kRefused,  // not a plain-data opcode
  kNone,
  kFixed,    // `size` bytes
  kCounted,  // a little-endian count of `size` bytes, then that many bytes
  kStop,
};

struct Op {
  Arg arg = Arg::kRefused;
  std::uint8_t size = 0;
};

constexpr Op Table(std::uint8_t code) {
  switch (code) {
    case 0x80: return {Arg::kFixed, 1};    // PROTO
    case 0x95: return {Arg::kFixed, 8};    // FRAME
    case '.': return {Arg::kStop, 0};      // STOP
    case '(':                              // MARK
    case '0':                              // POP
    case '1':                              // POP_MARK
    case '2':                              // DUP
    case 'N':                              // NONE
    case 0x88:                             // NEWTRUE
    case 0x89:                             // NEWFALSE
    case ']':                              // EMPTY_LIST
    case 'a':                              // APPEND
    case 'e':                              // APPENDS
    case 'l':                              // LIST
    case ')':                              // EMPTY_TUPLE
    case 't':                              // TUPLE
    case 0x85:                             // TUPLE1
    case 0x86:                             // TUPLE2
    case 0x87:                             // TUPLE3
    case '}':                              // EMPTY_DICT
    case 'd':                              // DICT
    case 's':                              // SETITEM
    case 'u':                              // SETITEMS
    case 0x8f:                             // EMPTY_SET
    case 0x90:                             // ADDITEMS
    case 0x91:                             // FROZENSET
    case 0x94:                             // MEMOIZE
      return {Arg::kNone, 0};
    case 'J': return {Arg::kFixed, 4};     // BININT
    case 'K': return {Arg::kFixed, 1};     // BININT1
    case 'M': return {Arg::kFixed, 2};     // BININT2
    case 'G': return {Arg::kFixed, 8};     // BINFLOAT
    case 'h': return {Arg::kFixed, 1};     // BINGET
    case 'j': return {Arg::kFixed, 4};     // LONG_BINGET
    case 'q': return {Arg::kFixed, 1};     // BINPUT
    case 'r': return {Arg::kFixed, 4};     // LONG_BINPUT
    case 0x8a: return {Arg::kCounted, 1};  // LONG1
    case 0x8b: return {Arg::kCounted, 4};  // LONG4
    case 'U': return {Arg::kCounted, 1};   // SHORT_BINSTRING
    case 'T': return {Arg::kCounted, 4};   // BINSTRING
    case 0x8c: return {Arg::kCounted, 1};  // SHORT_BINUNICODE
    case 'X': return {Arg::kCounted, 4};   // BINUNICODE
    case 0x8d: return {Arg::kCounted, 8};  // BINUNICODE8
    case 'C': return {Arg::kCounted, 1};   // SHORT_BINBYTES
    case 'B': return {Arg::kCounted, 4};   // BINBYTES
    case 0x8e: return {Arg::kCounted, 8};  // BINBYTES8
    case 0x96: return {Arg::kCounted, 8};  // BYTEARRAY8
    default: return {};
  }
}

PyObject* PlainPickle(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 1 || !PyBytes_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "plain_pickle(data: bytes)");
    return nullptr;
  }
  std::string_view data(PyBytes_AS_STRING(args[0]),
                        static_cast<std::size_t>(PyBytes_GET_SIZE(args[0])));
  return PyBool_FromLong(IsPlainPickle(data) ? 1 : 0);
}

PyMethodDef kPlainPickleDef = {
    "plain_pickle", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&PlainPickle)),
    METH_FASTCALL,
    "Whether a pickle builds only plain data (names nothing, calls nothing)."};

}  // namespace

bool IsPlainPickle(std::string_view data) {
  std::size_t at = 0;
  while (at < data.size()) {
    const Op op = Table(static_cast<std::uint8_t>(data[at++]));
    const std::size_t left = data.size() - at;
    switch (op.arg) {
      case Arg::kRefused:
        return false;
      case Arg::kStop:
        return true;
      case Arg::kNone:
        break;
      case Arg::kFixed:
        if (left < op.size) return false;
        at += op.size;
        break;
      case Arg::kCounted: {
        if (left < op.size) return false;
        std::uint64_t count = 0;
        for (std::uint8_t i = 0; i < op.size; ++i) {
          count |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(data[at + i])) << (8 * i);
        }
        at += op.size;
        if (count > data.size() - at) return false;
        at += static_cast<std::size_t>(count);
        break;
      }
    }
  }
  return false;  // no STOP
}

void BindPlainPickle(pybind11::module_& m) {
  PyObject* function = PyCFunction_NewEx(&kPlainPickleDef, nullptr, m.ptr());
  if (function == nullptr) throw pybind11::error_already_set();
  if (PyModule_AddObject(m.ptr(), "plain_pickle", function) != 0) {
    Py_DECREF(function);
    throw pybind11::error_already_set();
  }
}

}  // namespace dolsot::bindings
