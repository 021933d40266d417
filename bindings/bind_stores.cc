// Session stores for Python: FileStore and MemoryStore as bound classes, and
// PythonStore, which lets any Python object with load/save/delete/list (and
// optionally release and append) serve a C++ backend as its store (called
// with the GIL held).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "core/config.h"
#include "core/file_store.h"
#include "core/memory_store.h"
#include "core/session_id.h"

namespace py = pybind11;

namespace dolsot::bindings {
namespace {

// Runs `fn` with the GIL; a Python exception becomes a kIo Status naming the
// store method, so a broken custom store never crashes a backend.
template <typename T, typename Fn>
StatusOr<T> CallPython(const char* method, Fn&& fn) {
  py::gil_scoped_acquire gil;
  try {
    return fn();
  } catch (py::error_already_set& e) {
    // A store that refuses because another host holds the session (SessionBusy,
    // e.g. RedisStore's SessionLeased) is a retryable busy, not an I/O failure.
    const bool busy = e.matches(py::module_::import("dolsot.errors").attr("SessionBusy"));
    // One line, `Type: message` (what() would add the Python traceback).
    std::string what = py::str(e.type().attr("__name__")).cast<std::string>() + ": " +
                       py::str(e.value()).cast<std::string>();
    return Status(busy ? ErrorCode::kBusy : ErrorCode::kIo,
                  std::string("session store ") + method + "() raised " + what);
  } catch (const py::cast_error& e) {
    return Status(ErrorCode::kIo, std::string("session store ") + method +
                                      "() returned the wrong type: " + e.what());
  }
}

class PythonStore final : public SessionStore {
 public:
  explicit PythonStore(py::object store) : store_(std::move(store)) {
    has_release_ = py::hasattr(store_, "release") && PyCallable_Check(store_.attr("release").ptr());
    has_append_ = py::hasattr(store_, "append") && PyCallable_Check(store_.attr("append").ptr());
  }
  ~PythonStore() override {
    py::gil_scoped_acquire gil;
    store_ = py::object();
  }

  StatusOr<std::optional<std::string>> Load(std::string_view sid) override {
    return CallPython<std::optional<std::string>>("load", [&]() -> std::optional<std::string> {
      py::object blob = store_.attr("load")(py::str(sid.data(), sid.size()));
      if (blob.is_none()) return std::nullopt;
      if (!py::isinstance<py::bytes>(blob) && !py::isinstance<py::bytearray>(blob) &&
          !py::isinstance<py::memoryview>(blob)) {
        throw py::cast_error("load() must return bytes or None, got " +
                             std::string(py::str(blob.get_type().attr("__name__"))));
      }
      return std::string(py::bytes(blob));
    });
  }

  Status Save(std::string_view sid, std::string_view blob) override {
    return CallPython<bool>("save", [&] {
             store_.attr("save")(py::str(sid.data(), sid.size()), py::bytes(blob.data(), blob.size()));
             return true;
           })
        .status();
  }

  Status Append(std::string_view sid, std::string_view bytes) override {
    if (!has_append_) return SessionStore::Append(sid, bytes);
    return CallPython<bool>("append", [&] {
             store_.attr("append")(py::str(sid.data(), sid.size()), py::bytes(bytes.data(), bytes.size()));
             return true;
           })
        .status();
  }

  StatusOr<int> Delete(std::string_view sid) override {
    return CallPython<int>("delete", [&] {
      py::object n = store_.attr("delete")(py::str(sid.data(), sid.size()));
      return n.is_none() ? 0 : n.cast<int>();
    });
  }

  Status Release(std::string_view sid) override {
    if (!has_release_) return Status::Ok();
    return CallPython<bool>("release", [&] {
             store_.attr("release")(py::str(sid.data(), sid.size()));
             return true;
           })
        .status();
  }

  StatusOr<std::vector<SessionInfo>> List() override {
    return CallPython<std::vector<SessionInfo>>("list", [&] {
      std::vector<SessionInfo> out;
      for (py::handle item : store_.attr("list")()) {
        if (py::isinstance<SessionInfo>(item)) {
          out.push_back(item.cast<SessionInfo>());
        } else {
          out.push_back({py::str(item.attr("id")).cast<std::string>(),
                         item.attr("size_bytes").cast<std::uint64_t>(),
                         item.attr("last_used").cast<double>()});
        }
      }
      return out;
    });
  }

 private:
  py::object store_;
  bool has_release_ = false;
  bool has_append_ = false;
};

// The bound base class exposes the protocol methods on C++ stores.
template <typename Store, typename Class>
void DefineProtocol(Class& cls) {
  cls.def("load",
          [](Store& s, const std::string& sid) -> std::optional<py::bytes> {
            ThrowIfError(ValidateSessionId(sid));
            std::optional<std::string> blob;
            {
              py::gil_scoped_release release;
              auto r = s.Load(sid);
              if (!r.ok()) {
                py::gil_scoped_acquire gil;
                ThrowStatus(r.status());
              }
              blob = std::move(*r);
            }
            if (!blob) return std::nullopt;
            return py::bytes(*blob);
          },
          py::arg("sid"), "The blob saved under `sid`, or None.")
      .def("save",
           [](Store& s, const std::string& sid, py::bytes blob) {
             ThrowIfError(ValidateSessionId(sid));
             std::string data = blob;
             Status st;
             {
               py::gil_scoped_release release;
               st = s.Save(sid, data);
             }
             ThrowIfError(st);
           },
           py::arg("sid"), py::arg("blob"), "Replaces the blob under `sid` atomically.")
      .def("append",
           [](Store& s, const std::string& sid, py::bytes bytes) {
             ThrowIfError(ValidateSessionId(sid));
             std::string data = bytes;
             Status st;
             {
               py::gil_scoped_release release;
               st = s.Append(sid, data);
             }
             ThrowIfError(st);
           },
           py::arg("sid"), py::arg("data"),
           "Appends `data` to the blob under `sid` (a checkpoint's journal frame); "
           "load() returns the blob and what was appended since it was saved.")
      .def("delete",
           [](Store& s, const std::string& sid) {
             ThrowIfError(ValidateResetTarget(sid));
             StatusOr<int> r = 0;
             {
               py::gil_scoped_release release;
               r = s.Delete(sid);
             }
             return ValueOrThrow(std::move(r));
           },
           py::arg("sid"), "Deletes `sid` (\"all\": every session); returns how many.")
      .def("list",
           [](Store& s) {
             StatusOr<std::vector<SessionInfo>> r = std::vector<SessionInfo>{};
             {
               py::gil_scoped_release release;
               r = s.List();
             }
             return ValueOrThrow(std::move(r));
           },
           "Every stored session, as SessionInfo.");
}

}  // namespace

std::shared_ptr<SessionStore> StoreFromPython(py::handle store) {
  if (store.is_none()) return nullptr;
  if (py::isinstance<FileStore>(store)) return store.cast<std::shared_ptr<FileStore>>();
  if (py::isinstance<MemoryStore>(store)) return store.cast<std::shared_ptr<MemoryStore>>();
  for (const char* method : {"load", "save", "delete", "list"}) {
    if (!py::hasattr(store, method) || !PyCallable_Check(store.attr(method).ptr())) {
      ThrowStatus({ErrorCode::kInvalidArgument,
                   std::string("store must have callable load, save, delete and list methods; ") +
                       "missing " + method + "()"});
    }
  }
  return std::make_shared<PythonStore>(py::reinterpret_borrow<py::object>(store));
}

void BindStores(py::module_& m) {
  py::class_<FileStore, std::shared_ptr<FileStore>> file_store(
      m, "FileStore",
      "One file per session under a private (0700, owner-checked) directory; atomic writes; "
      "TTL reaping.");
  file_store
      .def(py::init([](std::optional<std::string> path, std::optional<int> ttl_days) {
             ConfigOverrides o;
             if (path) o.cache_dir = *path;
             o.ttl_days = ttl_days;
             Config c = ValueOrThrow(ResolveConfig(o));
             StatusOr<std::unique_ptr<FileStore>> store = Status(ErrorCode::kInternal, "unset");
             {
               py::gil_scoped_release release;
               store = FileStore::Open(c.cache_dir, c.ttl_days);
             }
             return std::shared_ptr<FileStore>(ValueOrThrow(std::move(store)));
           }),
           py::arg("path") = py::none(), py::kw_only(), py::arg("ttl_days") = py::none())
      .def_property_readonly("path", &FileStore::directory)
      .def_property_readonly("ttl_days", &FileStore::ttl_days)
      .def("__repr__", [](const FileStore& s) { return "FileStore('" + s.directory() + "')"; });
  DefineProtocol<FileStore>(file_store);

  py::class_<MemoryStore, std::shared_ptr<MemoryStore>> memory_store(
      m, "MemoryStore", "An in-process dict of session blobs; no TTL, no persistence.");
  memory_store.def(py::init<>()).def("__repr__", [](const MemoryStore&) { return "MemoryStore()"; });
  DefineProtocol<MemoryStore>(memory_store);
}

}  // namespace dolsot::bindings
