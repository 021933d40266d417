// Maps core Status codes to the exception classes of dolsot.errors. This is
// the only place a core error becomes a Python exception.
#include <pybind11/pybind11.h>

#include "bindings/bindings.h"

namespace py = pybind11;

namespace dolsot::bindings {
namespace {

const char* ExceptionClassName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidSession: return "InvalidSession";
    case ErrorCode::kInvalidToolbox: return "InvalidToolbox";
    case ErrorCode::kConfig:
    case ErrorCode::kInvalidArgument: return "ConfigError";
    case ErrorCode::kBusy: return "SessionBusy";
    case ErrorCode::kUnimplemented: return "Unsupported";
    case ErrorCode::kWeakerWalls: return "WeakerWalls";
    case ErrorCode::kIo:
    case ErrorCode::kPermission:
    case ErrorCode::kCorrupt: return "StoreError";
    default: return "WorkerError";
  }
}

}  // namespace

void ThrowStatus(const Status& status) {
  py::gil_scoped_acquire gil;
  py::object errors = py::module_::import("dolsot.errors");
  py::object cls = errors.attr(ExceptionClassName(status.code()));
  PyErr_SetString(cls.ptr(), status.message().c_str());
  throw py::error_already_set();
}

void BindErrors(py::module_& m) {
  // The classes live in dolsot/errors.py; importing it here fails early if the
  // package is broken rather than at the first error.
  py::module_::import("dolsot.errors");
}

}  // namespace dolsot::bindings
