// Namespace checkpoints: per-name encoding (module reference, pickle, dill)
// into the blob of checkpoint_format.h, and the restore from one.
#include "backend_subprocess/checkpoint.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "backend_subprocess/checkpoint_format.h"
#include "backend_subprocess/checkpoint_values.h"
#include "core/crc32c.h"
#include "embedded/cell_sources.h"
#include "embedded/py_ref.h"

namespace dolsot {
namespace {

using checkpoint_format::BlobEntry;
using checkpoint_format::Codec;
using checkpoint_format::EntryView;
using checkpoint_format::GetLe;
using checkpoint_format::IsCellFilename;
using checkpoint_format::kCounterName;
using checkpoint_format::kEntryFixedSize;
using checkpoint_format::kHeaderSize;
using checkpoint_format::PutLe;
using checkpoint_format::WriteBlobHeader;
using checkpoint_format::WriteEntryPrefix;
using checkpoint_values::IsDunder;
using checkpoint_values::IsMainDefinition;
using checkpoint_values::PendingIsCannotPickle;
using checkpoint_values::Utf8;

constexpr char kMainReference[] = "\x8c\x08__main__";  // SHORT_BINUNICODE "__main__"

// ---------------------------------------------------------------- Python helpers
// `import <module>; return <module>.<attr>` as a new reference, or empty with
// the error indicator set.
Ref ImportAttr(const char* module, const char* attr) {
  Ref imported(PyImport_ImportModule(module));
  if (!imported) return Ref();
  return Ref(PyObject_GetAttrString(imported.get(), attr));
}

// `import _pickle`. Loading it imports functools (with collections, types,
// operator, ...: several ms per process, paid by every CLI call) only to keep
// functools.partial, which is _functools.partial. While _pickle loads, a
// stand-in `functools` module holding just that is lent to sys.modules, then
// taken back, so a later `import functools` gets the real module.
Ref ImportCPickle() {
  PyObject* modules = PyImport_GetModuleDict();  // borrowed
  bool lend = PyDict_GetItemString(modules, "_pickle") == nullptr &&
              PyDict_GetItemString(modules, "functools") == nullptr;
  Ref stand_in;
  if (lend) {
    Ref partial = ImportAttr("_functools", "partial");
    stand_in = Ref(partial ? PyModule_New("functools") : nullptr);
    lend = stand_in && PyObject_SetAttrString(stand_in.get(), "partial", partial.get()) == 0 &&
           PyDict_SetItemString(modules, "functools", stand_in.get()) == 0;
    if (!lend) PyErr_Clear();  // import _pickle the ordinary way
  }
  Ref imported(PyImport_ImportModule("_pickle"));
  if (lend && PyDict_GetItemString(modules, "functools") == stand_in.get()) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (PyDict_DelItemString(modules, "functools") != 0) PyErr_Clear();
    PyErr_Restore(type, value, traceback);
  }
  return imported;
}

// pickle.<attr> from the C accelerator _pickle, which is what pickle exports:
// importing the pickle module itself (re, functools, ...) costs ~3-15 ms per
// process, which the CLI pays on every call.
Ref PicklerAttr(const char* attr) {
  Ref module = ImportCPickle();
  Ref value(module ? PyObject_GetAttrString(module.get(), attr) : nullptr);
  if (value) return value;
  PyErr_Clear();
  return ImportAttr("pickle", attr);
}


// ---------------------------------------------------------------- encoding

// dill pickles every class and function of __main__ by value, so two names
// saved apart (`class A`, `class B(A)`) would come back with two different A's.
// This pickler stores the value itself by value but every OTHER __main__ class
// or function that is reachable as __main__.<qualname> (and not a member of
// the value) by reference; the restore loads definitions until no more
// resolve (docs/checkpoint-format.md). It also notes the filename of every
// code object it saves by value, so the checkpoint can keep the sources of
// the cells those functions came from.
constexpr char kSessionDillSource[] = R"PY(
import io, sys, types, dill

code_filenames = set()

class SessionPickler(dill.Pickler):
    def save(self, obj, save_persistent_id=True):
        if type(obj) is types.CodeType:
            code_filenames.add(obj.co_filename)
        elif (obj is not self.dolsot_root and id(obj) not in self.memo
                and isinstance(obj, (type, types.FunctionType))
                and getattr(obj, '__module__', None) == '__main__'
                and '<' not in getattr(obj, '__qualname__', '<')):
            parts = obj.__qualname__.split('.')
            owner = getattr(sys.modules.get('__main__'), parts[0], None)
            found = owner
            for part in parts[1:]:
                found = getattr(found, part, None)
            # A method of the value itself is part of it, not a reference.
            if found is obj and owner is not self.dolsot_root:
                self.save_global(obj)
                return
        dill.Pickler.save(self, obj, save_persistent_id)

def dumps(obj, protocol):
    buffer = io.BytesIO()
    pickler = SessionPickler(buffer, protocol=protocol)
    pickler.dolsot_root = obj
    pickler.dump(obj)
    return buffer.getvalue()
)PY";

// The module scope of kSessionDillSource (imports dill), or empty with the
// error set.
Ref MakeSessionDillScope() {
  Ref scope(PyDict_New());
  if (!scope || PyDict_SetItemString(scope.get(), "__builtins__", PyEval_GetBuiltins()) != 0) {
    return Ref();
  }
  Ref ran(PyRun_String(kSessionDillSource, Py_file_input, scope.get(), scope.get()));
  if (!ran) return Ref();
  return scope;
}

// scope[name] as a new reference, or empty with the error set.
Ref ScopeItem(PyObject* scope, const char* name) {
  PyObject* item = PyDict_GetItemString(scope, name);  // borrowed
  if (item == nullptr) PyErr_Format(PyExc_KeyError, "%s", name);
  Py_XINCREF(item);
  return Ref(item);
}

// A payload is a list of bytes objects (immutable, so their sizes cannot change
// between measuring and copying them), concatenated in the blob.
size_t ChunksSize(PyObject* chunks) {
  size_t total = 0;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(chunks); ++i) {
    total += static_cast<size_t>(PyBytes_GET_SIZE(PyList_GET_ITEM(chunks, i)));
  }
  return total;
}

std::string_view ChunkAt(PyObject* chunks, Py_ssize_t i) {
  PyObject* chunk = PyList_GET_ITEM(chunks, i);
  return std::string_view(PyBytes_AS_STRING(chunk), static_cast<size_t>(PyBytes_GET_SIZE(chunk)));
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return memmem(haystack.data(), haystack.size(), needle.data(), needle.size()) != nullptr;
}

// Whether the concatenated chunks contain `needle`, also across chunk edges.
bool ChunksContain(PyObject* chunks, std::string_view needle) {
  std::string edge;  // the tail of the previous chunk + the head of this one
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(chunks); ++i) {
    std::string_view chunk = ChunkAt(chunks, i);
    if (Contains(chunk, needle)) return true;
    edge.append(chunk.substr(0, needle.size() - 1));
    if (Contains(edge, needle)) return true;
    edge.assign(chunk.substr(chunk.size() - std::min(chunk.size(), needle.size() - 1)));
  }
  return false;
}

// A one-element list holding `bytes` (a new reference), or empty with the error set.
Ref SingleChunk(Ref bytes) {
  if (!bytes) return Ref();
  if (!PyBytes_Check(bytes.get())) {
    PyErr_SetString(PyExc_TypeError, "dumps did not return bytes");
    return Ref();
  }
  Ref list(PyList_New(1));
  if (list) PyList_SET_ITEM(list.get(), 0, Py_NewRef(bytes.get()));
  return list;
}

// pickle.Pickler(<an object whose write is `write`>, protocol 5): its dump
// and clear_memo methods, or false (the error set, or none when the
// interpreter has no sys.implementation).
bool MakePickler(PyObject* write, Ref* dump, Ref* clear_memo) {
  Ref pickler_type = PicklerAttr("Pickler");
  // types.SimpleNamespace, without importing types: sys.implementation is one.
  PyObject* implementation = PySys_GetObject("implementation");  // borrowed
  if (!pickler_type || implementation == nullptr) return false;
  Ref no_args(PyTuple_New(0));
  Ref kwargs(Py_BuildValue("{s:O}", "write", write));
  Ref writer(no_args && kwargs
                 ? PyObject_Call(reinterpret_cast<PyObject*>(Py_TYPE(implementation)),
                                 no_args.get(), kwargs.get())
                 : nullptr);
  Ref pickler(writer ? PyObject_CallFunction(pickler_type.get(), "Oi", writer.get(), 5) : nullptr);
  if (!pickler) return false;
  *clear_memo = Ref(PyObject_GetAttrString(pickler.get(), "clear_memo"));
  *dump = Ref(*clear_memo ? PyObject_GetAttrString(pickler.get(), "dump") : nullptr);
  return static_cast<bool>(*dump);
}

// pickle.Pickler writing into a list: large bytes values reach the list as the
// value's own bytes object (the C pickler streams them past its buffer), so the
// blob is the only copy made of them.
class StreamPickler {
 public:
  // The chunks of pickle.dumps(value, 5), or empty with the error set.
  Ref Dump(PyObject* value) {
    if (!dump_ && !Start()) return Ref();
    Ref done(PyObject_CallOneArg(dump_.get(), value));
    const Py_ssize_t written = PyList_GET_SIZE(sink_.get());
    Ref chunks(done ? PyList_GetSlice(sink_.get(), 0, written) : nullptr);
    if (!chunks || !OnlyBytes(chunks.get()) || !Reset()) {
      dump_ = Ref();  // a failed dump may leave the pickler mid-frame: start afresh
      return Ref();
    }
    return chunks;
  }

 private:
  bool Start() {
    sink_ = Ref(PyList_New(0));
    Ref append(sink_ ? PyObject_GetAttrString(sink_.get(), "append") : nullptr);
    return append && MakePickler(append.get(), &dump_, &clear_memo_);
  }

  // Empties the sink and the memo (which would keep every value alive).
  bool Reset() {
    if (PyList_SetSlice(sink_.get(), 0, PyList_GET_SIZE(sink_.get()), nullptr) != 0) return false;
    return Ref(PyObject_CallNoArgs(clear_memo_.get())) ? true : false;
  }

  // Replaces every non-bytes chunk (bytearray, buffers) by a bytes copy.
  static bool OnlyBytes(PyObject* chunks) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(chunks); ++i) {
      PyObject* chunk = PyList_GET_ITEM(chunks, i);
      if (PyBytes_CheckExact(chunk)) continue;
      PyObject* copy = PyBytes_FromObject(chunk);
      if (copy == nullptr || PyList_SetItem(chunks, i, copy) != 0) return false;
    }
    return true;
  }

  Ref sink_;
  Ref dump_;
  Ref clear_memo_;
};

// pickle.Pickler writing into a digest: each chunk is digested as it comes
// and let go, so checking a value against its base's entry (a delta
// checkpoint) takes no memory past the pickler's frame, which the allocator
// hands back frame after frame (in a forked checkpoint writer, new memory is
// a page fault and a page cleared per 4 KiB: most of what writing 100 MB of
// pickles cost there).
class DigestingPickler {
 public:
  DigestingPickler() = default;
  DigestingPickler(const DigestingPickler&) = delete;
  DigestingPickler& operator=(const DigestingPickler&) = delete;
  // Cell code that kept the `write` callable (found through gc, say) gets an
  // error from it afterwards, not this object's freed memory.
  ~DigestingPickler() {
    if (capsule_) (void)PyCapsule_SetName(capsule_.get(), kRetiredName);
  }

  // The digest of pickle.dumps(value, 5) followed by `trailer(payload size)`
  // (EntryDigest's layout), or nullopt with the error set.
  template <typename Trailer>
  std::optional<Digest128> Digest(PyObject* value, const Trailer& trailer) {
    if (!dump_ && !Start()) return std::nullopt;
    DigestBuilder digest;
    digest_ = &digest;
    size_ = 0;
    Ref done(PyObject_CallOneArg(dump_.get(), value));
    digest_ = nullptr;
    if (!done || !Ref(PyObject_CallNoArgs(clear_memo_.get()))) {
      dump_ = Ref();  // a failed dump may leave the pickler mid-frame: start afresh
      return std::nullopt;
    }
    digest.Update(trailer(size_));
    return digest.Finish();
  }

 private:
  static PyObject* Write(PyObject* capsule, PyObject* data) {
    auto* self = static_cast<DigestingPickler*>(PyCapsule_GetPointer(capsule, kCapsuleName));
    if (self == nullptr) return nullptr;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) != 0) return nullptr;
    if (self->digest_ != nullptr) {
      self->digest_->Update(std::string_view(static_cast<const char*>(view.buf),
                                             static_cast<size_t>(view.len)));
    }
    self->size_ += static_cast<size_t>(view.len);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
  }

  bool Start() {
    static PyMethodDef write_def = {"write", reinterpret_cast<PyCFunction>(&Write), METH_O,
                                    nullptr};
    if (!capsule_) capsule_ = Ref(PyCapsule_New(this, kCapsuleName, nullptr));
    Ref write(capsule_ ? PyCFunction_New(&write_def, capsule_.get()) : nullptr);
    return write && MakePickler(write.get(), &dump_, &clear_memo_);
  }

  static constexpr const char* kCapsuleName = "dolsot.DigestingPickler";
  static constexpr const char* kRetiredName = "dolsot.DigestingPickler (retired)";
  Ref capsule_;  // holds `this` for `write`
  DigestBuilder* digest_ = nullptr;
  size_t size_ = 0;
  Ref dump_;
  Ref clear_memo_;
};

struct PendingEntry {
  std::string name;
  Codec codec;
  Ref chunks;  // list of bytes: the payload
};

// WriteEntryPrefix for `entry`, whose payload is `payload_size` bytes.
size_t WriteEntryPrefix(char* frame, const PendingEntry& entry, size_t payload_size) {
  return WriteEntryPrefix(frame, entry.codec, entry.name, payload_size);
}


// Encodes one value at a time. Imports dill on first need only.
class Encoder {
 public:
  explicit Encoder(bool globals_is_main) : globals_is_main_(globals_is_main) {}

  // The codec and payload chunks for `value`, or nullopt when neither codec
  // can save it. Leaves the error indicator clear.
  std::optional<std::pair<Codec, Ref>> Encode(PyObject* value) {
    if (PyModule_Check(value)) return EncodeModule(value);
    if (!IsMainDefinition(value)) {
      Ref pickled = pickler_.Dump(value);
      const std::string_view main_reference(kMainReference, sizeof(kMainReference) - 1);
      if (pickled && (globals_is_main_ || !ChunksContain(pickled.get(), main_reference))) {
        return std::make_pair(Codec::kPickle, std::move(pickled));
      }
      if (!pickled && PendingIsCannotPickle()) return std::nullopt;
      PyErr_Clear();
    }
    Ref by_value = SingleChunk(Dill(value));
    if (!by_value) {
      PyErr_Clear();
      return std::nullopt;
    }
    return std::make_pair(Codec::kDill, std::move(by_value));
  }

  // The size of the entry `value` would make when it would be saved as
  // `against`'s entry for `name`, else nullopt; found by pickling it into a
  // digest (nothing kept). Only for what Encode would pickle in a session:
  // a value it would give dill, or a module, is encoded and compared
  // instead (IsBaseValue). Leaves the error indicator clear.
  std::optional<size_t> PicklesAsBase(PyObject* value, std::string_view name,
                                      const BaseDigests& against) {
    auto found = against.entries.find(name);
    if (found == against.entries.end() || !globals_is_main_ || PyModule_Check(value) ||
        IsMainDefinition(value)) {
      return std::nullopt;
    }
    std::string trailer;
    size_t payload = 0;
    std::optional<Digest128> digest = digester_.Digest(value, [&](size_t size) {
      payload = size;
      trailer.assign(kEntryFixedSize - 4 + name.size(), '\0');
      trailer.resize(WriteEntryPrefix(trailer.data(), Codec::kPickle, name, size));
      return std::string_view(trailer);
    });
    PyErr_Clear();
    if (!digest || *digest != found->second) return std::nullopt;
    return kEntryFixedSize + name.size() + payload;
  }

  // The filenames of the code objects saved by value so far (the session
  // pickler's only), sorted. Leaves the error indicator clear.
  std::vector<std::string> CodeFilenames() const {
    std::vector<std::string> names;
    if (!dill_scope_) return names;
    PyObject* found = PyDict_GetItemString(dill_scope_.get(), "code_filenames");  // borrowed
    if (found == nullptr || !PyAnySet_Check(found)) return names;
    Ref iterator(PyObject_GetIter(found));
    while (iterator) {
      Ref item(PyIter_Next(iterator.get()));
      if (!item) break;
      if (std::optional<std::string_view> text = Utf8(item.get())) names.emplace_back(*text);
    }
    PyErr_Clear();
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  // A module is saved as its name, if importing that name gives it back.
  static std::optional<std::pair<Codec, Ref>> EncodeModule(PyObject* module) {
    Ref name(PyModule_GetNameObject(module));
    PyObject* loaded = name ? PyDict_GetItemWithError(PyImport_GetModuleDict(), name.get())
                            : nullptr;  // borrowed
    Ref encoded(loaded == module ? PyUnicode_AsUTF8String(name.get()) : nullptr);
    Ref chunks = encoded ? SingleChunk(std::move(encoded)) : Ref();
    if (!chunks) {
      PyErr_Clear();
      return std::nullopt;
    }
    return std::make_pair(Codec::kModuleRef, std::move(chunks));
  }

  // dill.dumps(value, 5) (or the session pickler's), as a new bytes reference.
  Ref Dill(PyObject* value) {
    if (!dill_dumps_) {
      if (globals_is_main_) {
        dill_scope_ = MakeSessionDillScope();
        dill_dumps_ = dill_scope_ ? ScopeItem(dill_scope_.get(), "dumps") : Ref();
      } else {
        dill_dumps_ = ImportAttr("dill", "dumps");
      }
      if (!dill_dumps_) return Ref();
    }
    return Ref(PyObject_CallFunction(dill_dumps_.get(), "Oi", value, 5));
  }

  bool globals_is_main_;
  StreamPickler pickler_;
  DigestingPickler digester_;
  Ref dill_scope_;  // kSessionDillSource's module scope, once dill is needed
  Ref dill_dumps_;
};

// A one-chunk payload holding `bytes` (copied), or empty with the error set.
Ref BytesChunk(std::string_view bytes) {
  return SingleChunk(
      Ref(PyBytes_FromStringAndSize(bytes.data(), static_cast<Py_ssize_t>(bytes.size()))));
}

// The views of a payload's chunks, in order.
std::vector<std::string_view> ChunkViews(PyObject* chunks) {
  std::vector<std::string_view> views;
  views.reserve(static_cast<size_t>(PyList_GET_SIZE(chunks)));
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(chunks); ++i) views.push_back(ChunkAt(chunks, i));
  return views;
}

// The blob of `entries` (checkpoint_format::BuildBlob over their chunks).
std::string BuildBlob(const std::vector<PendingEntry>& entries) {
  std::vector<BlobEntry> blob_entries;
  blob_entries.reserve(entries.size());
  for (const PendingEntry& entry : entries) {
    blob_entries.push_back(BlobEntry{entry.codec, entry.name, ChunkViews(entry.chunks.get())});
  }
  return checkpoint_format::BuildBlob(blob_entries);
}
// ---------------------------------------------------------------- decoding
// Loads one entry's value as a new reference, or empty with the error set.
class Decoder {
 public:
  Ref Decode(const EntryView& entry) {
    if (entry.codec == Codec::kModuleRef) {
      Ref name(PyUnicode_DecodeUTF8(entry.payload.data(),
                                    static_cast<Py_ssize_t>(entry.payload.size()), "strict"));
      return name ? Ref(PyImport_Import(name.get())) : Ref();
    }
    Ref& loads = entry.codec == Codec::kDill ? dill_loads_ : pickle_loads_;
    if (!loads) {
      loads = entry.codec == Codec::kDill ? ImportAttr("dill", "loads") : PicklerAttr("loads");
      if (!loads) return Ref();
    }
    // A read-only view of the blob: no copy of the payload before unpickling.
    Ref view(PyMemoryView_FromMemory(const_cast<char*>(entry.payload.data()),
                                     static_cast<Py_ssize_t>(entry.payload.size()), PyBUF_READ));
    if (!view) return Ref();
    return Ref(PyObject_CallOneArg(loads.get(), view.get()));
  }

 private:
  Ref pickle_loads_;
  Ref dill_loads_;
};

// Modules first, then dill (cell-defined classes and functions), then pickle
// (whose values may refer to those definitions through __main__).
int RestorePhase(Codec codec) {
  switch (codec) {
    case Codec::kModuleRef: return 0;
    case Codec::kDill: return 1;
    case Codec::kPickle: return 2;
    case Codec::kCellSource:
    case Codec::kCellCounter:
    case Codec::kGateMemory:
    case Codec::kSandboxMark: return -1;  // not names (the host's entries)
  }
  return 2;
}

// Loads and sets each entry; appends the names set to `restored` and returns
// the entries that failed.
std::vector<const EntryView*> RestoreEach(PyObject* globals, Decoder& decoder,
                                          const std::vector<const EntryView*>& entries,
                                          std::vector<std::string>& restored) {
  std::vector<const EntryView*> failed;
  for (const EntryView* entry : entries) {
    Ref key(PyUnicode_DecodeUTF8(entry->name.data(), static_cast<Py_ssize_t>(entry->name.size()),
                                 "strict"));
    Ref value = key ? decoder.Decode(*entry) : Ref();
    if (!value || PyDict_SetItem(globals, key.get(), value.get()) != 0) {
      PyErr_Clear();
      failed.push_back(entry);
      continue;
    }
    restored.emplace_back(entry->name);
  }
  return failed;
}

bool IsMainDict(PyObject* globals) {
  PyObject* main = PyDict_GetItemString(PyImport_GetModuleDict(), "__main__");  // borrowed
  return main != nullptr && PyModule_Check(main) && PyModule_GetDict(main) == globals;
}

}  // namespace

std::string CellFilename(std::uint64_t n) { return "<cell " + std::to_string(n) + ">"; }

namespace {

// Every entry of the checkpoint of `globals`, encoded (SerializeNamespace).
struct CollectedEntries {
  std::vector<PendingEntry> entries;
  std::vector<std::string> saved;
  std::vector<std::string> dropped;
  std::vector<std::string> kept;  // `against`'s values, found by digest (no entry)
  size_t kept_bytes = 0;          // the entries they would have made
};

// With `against`, a value whose pickle is its base entry is only named, in
// `kept` (and `saved`).
CollectedEntries CollectEntries(PyObject* globals, const std::vector<std::string>& skip,
                                std::uint64_t cells_run, const BaseDigests* against = nullptr) {
  CollectedEntries result;
  std::vector<PendingEntry>& entries = result.entries;
  // A snapshot of the items: pickling may run code that changes `globals`.
  Ref items(globals != nullptr && PyDict_Check(globals) ? PyDict_Items(globals) : nullptr);
  PyErr_Clear();
  Encoder encoder(items && IsMainDict(globals));
  const Py_ssize_t count = items ? PyList_GET_SIZE(items.get()) : 0;
  for (Py_ssize_t i = 0; i < count; ++i) {
    PyObject* pair = PyList_GET_ITEM(items.get(), i);
    std::optional<std::string_view> name = Utf8(PyTuple_GET_ITEM(pair, 0));
    if (!name || name->empty() || IsDunder(*name)) continue;
    std::string key(*name);
    bool skipped = false;
    for (const std::string& s : skip) skipped = skipped || s == key;
    if (skipped) continue;
    PyObject* value = PyTuple_GET_ITEM(pair, 1);
    if (against != nullptr) {
      if (std::optional<size_t> size = encoder.PicklesAsBase(value, key, *against)) {
        result.kept_bytes += *size;
        result.saved.push_back(key);
        result.kept.push_back(std::move(key));
        continue;
      }
    }
    std::optional<std::pair<Codec, Ref>> encoded = encoder.Encode(value);
    PyErr_Clear();
    if (!encoded) {
      result.dropped.push_back(std::move(key));
      continue;
    }
    result.saved.push_back(key);
    entries.push_back(PendingEntry{std::move(key), encoded->first, std::move(encoded->second)});
  }
  // The sources of the cells whose functions were saved by value, so that a
  // traceback through one shows its own lines after a restore.
  for (const std::string& filename : encoder.CodeFilenames()) {
    if (!IsCellFilename(filename)) continue;
    std::optional<std::string> source = RegisteredCellSource(filename);
    Ref chunk = source ? BytesChunk(*source) : Ref();
    PyErr_Clear();
    if (chunk) entries.push_back(PendingEntry{filename, Codec::kCellSource, std::move(chunk)});
  }
  char counter[8];
  PutLe(counter, cells_run, 8);
  Ref counter_chunk = BytesChunk(std::string_view(counter, sizeof(counter)));
  PyErr_Clear();
  if (counter_chunk) {
    entries.push_back(
        PendingEntry{std::string(kCounterName), Codec::kCellCounter, std::move(counter_chunk)});
  }
  return result;
}

}  // namespace

SerializedNamespace SerializeNamespace(PyObject* globals, const std::vector<std::string>& skip,
                                       std::uint64_t cells_run) {
  CollectedEntries collected = CollectEntries(globals, skip, cells_run);
  SerializedNamespace result;
  result.blob = BuildBlob(collected.entries);
  result.saved = std::move(collected.saved);
  result.dropped = std::move(collected.dropped);
  return result;
}

struct NamespacePieces::Held {
  std::vector<PendingEntry> entries;  // the pickled chunks the pieces view
  std::vector<std::string> headers;   // the blob's header, then each entry's
};

NamespacePieces::NamespacePieces() = default;
NamespacePieces::~NamespacePieces() = default;
NamespacePieces::NamespacePieces(NamespacePieces&&) noexcept = default;

namespace {

size_t EntrySize(const PendingEntry& entry) {
  return kEntryFixedSize + entry.name.size() + ChunksSize(entry.chunks.get());
}

// Encodes `names` of `globals` again (values a delta found to be the base's,
// for a whole checkpoint after all) into `entries`, ahead of the cell
// sources and the counter. A name gone meanwhile is left out of `saved`; one
// that cannot be encoded now is moved to `dropped`.
void EncodeAgain(PyObject* globals, const std::vector<std::string>& names,
                 std::vector<PendingEntry>& entries, std::vector<std::string>& saved,
                 std::vector<std::string>& dropped) {
  Encoder encoder(IsMainDict(globals));
  std::vector<PendingEntry> encoded;
  for (const std::string& name : names) {
    PyObject* value = PyDict_GetItemString(globals, name.c_str());  // borrowed
    std::optional<std::pair<Codec, Ref>> entry =
        value != nullptr ? encoder.Encode(value) : std::nullopt;
    PyErr_Clear();
    if (entry) {
      encoded.push_back(PendingEntry{name, entry->first, std::move(entry->second)});
      continue;
    }
    saved.erase(std::remove(saved.begin(), saved.end(), name), saved.end());
    if (value != nullptr) dropped.push_back(name);
  }
  auto values_end = std::find_if(entries.begin(), entries.end(), [](const PendingEntry& entry) {
    return entry.codec == Codec::kCellSource || entry.codec == Codec::kCellCounter;
  });
  entries.insert(values_end, std::make_move_iterator(encoded.begin()),
                 std::make_move_iterator(encoded.end()));
}

// Whether `entry` is a value of `against`'s base: a named value whose entry
// has the digest the base's has (EntryDigest: payload, then codec, name and
// size).
bool IsBaseValue(const PendingEntry& entry, const BaseDigests& against) {
  if (entry.codec != Codec::kPickle && entry.codec != Codec::kDill &&
      entry.codec != Codec::kModuleRef) {
    return false;
  }
  auto found = against.entries.find(entry.name);
  if (found == against.entries.end()) return false;
  std::string prefix(kEntryFixedSize + entry.name.size(), '\0');
  const size_t written = WriteEntryPrefix(prefix.data(), entry, ChunksSize(entry.chunks.get()));
  DigestBuilder digest;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entry.chunks.get()); ++i) {
    digest.Update(ChunkAt(entry.chunks.get(), i));
  }
  digest.Update(std::string_view(prefix.data(), written));
  return digest.Finish() == found->second;
}

}  // namespace

NamespacePieces SerializeNamespacePieces(PyObject* globals, const std::vector<std::string>& skip,
                                         std::uint64_t cells_run, const BaseDigests* against) {
  CollectedEntries collected = CollectEntries(globals, skip, cells_run, against);
  NamespacePieces result;
  result.saved = std::move(collected.saved);
  result.dropped = std::move(collected.dropped);
  result.held_ = std::make_unique<NamespacePieces::Held>();
  NamespacePieces::Held& held = *result.held_;
  held.entries = std::move(collected.entries);
  if (against != nullptr) {
    // What was encoded after all (a value dill saves, a module, a pickle
    // that differs) may still be the base's.
    std::vector<bool> kept(held.entries.size(), false);
    size_t kept_bytes = collected.kept_bytes, written_bytes = 0;
    for (size_t i = 0; i < held.entries.size(); ++i) {
      kept[i] = IsBaseValue(held.entries[i], *against);
      (kept[i] ? kept_bytes : written_bytes) += EntrySize(held.entries[i]);
    }
    // A delta writing more than it keeps would leave the store a base and a
    // delta larger than a new base: the checkpoint is whole instead (what
    // the digests kept is pickled again, which costs less than what is
    // written anyway). Nothing kept: the entries are whole already.
    if (kept_bytes > 0 && written_bytes > kept_bytes) {
      EncodeAgain(globals, collected.kept, held.entries, result.saved, result.dropped);
    } else if (kept_bytes > 0) {
      result.delta = true;
      result.delta_of = against->base;
      result.kept = std::move(collected.kept);
      std::vector<PendingEntry> written;
      for (size_t i = 0; i < held.entries.size(); ++i) {
        if (kept[i]) {
          result.kept.push_back(std::move(held.entries[i].name));
        } else {
          written.push_back(std::move(held.entries[i]));
        }
      }
      held.entries = std::move(written);  // the kept pickles are freed here
      std::sort(result.kept.begin(), result.kept.end());
    }
  }
  // Sized first: the pieces view these strings, which must not move.
  held.headers.reserve(held.entries.size() + 1);
  held.headers.emplace_back(kHeaderSize, '\0');
  WriteBlobHeader(held.headers.back().data(), held.entries.size());
  result.pieces.push_back(held.headers.back());
  result.size = kHeaderSize;
  for (const PendingEntry& entry : held.entries) {
    const size_t payload = ChunksSize(entry.chunks.get());
    std::string& header = held.headers.emplace_back(kEntryFixedSize + entry.name.size(), '\0');
    const size_t prefix = WriteEntryPrefix(header.data() + 4, entry, payload);
    // The checksum is read off the chunks where they are: nothing is copied.
    uint32_t crc = CopyWithCrc32c(~0u, nullptr, header.data() + 4, prefix);
    result.pieces.push_back(header);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entry.chunks.get()); ++i) {
      std::string_view chunk = ChunkAt(entry.chunks.get(), i);
      crc = CopyWithCrc32c(crc, nullptr, chunk.data(), chunk.size());
      if (!chunk.empty()) result.pieces.push_back(chunk);
    }
    PutLe(header.data(), ~crc, 4);
    result.size += header.size() + payload;
  }
  return result;
}

StatusOr<RestoredNamespace> RestoreNamespace(PyObject* globals, std::string_view blob) {
  if (globals == nullptr || !PyDict_Check(globals)) {
    return InvalidArgument("RestoreNamespace: globals is not a dict");
  }
  StatusOr<std::vector<EntryView>> entries = checkpoint_format::ParseBlob(blob);
  if (!entries.ok()) return entries.status();
  RestoredNamespace result;
  for (const EntryView& entry : *entries) {
    if (entry.codec == Codec::kCellSource) RegisterCellSource(entry.name, entry.payload);
    if (entry.codec == Codec::kCellCounter) result.cells_run = GetLe(entry.payload.data(), 8);
  }
  Decoder decoder;
  for (int phase = 0; phase <= 2; ++phase) {
    std::vector<const EntryView*> pending;
    for (const EntryView& entry : *entries) {
      if (RestorePhase(entry.codec) == phase) pending.push_back(&entry);
    }
    // Definitions may refer to each other by reference: retry while progress.
    const bool retry = phase == 1;
    size_t before = pending.size() + 1;
    while (!pending.empty() && pending.size() < before) {
      before = pending.size();
      pending = RestoreEach(globals, decoder, pending, result.restored);
      if (!retry) break;
    }
    for (const EntryView* entry : pending) result.failed.emplace_back(entry->name);
  }
  return result;
}


namespace {

bool HoldsMainDefinition(PyObject* globals) {
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(globals, &pos, &key, &value)) {
    if (!PyType_Check(value) && !PyFunction_Check(value)) continue;
    PyObject* module = PyType_Check(value)
                           ? PyDict_GetItemString(reinterpret_cast<PyTypeObject*>(value)->tp_dict,
                                                  "__module__")
                           : reinterpret_cast<PyFunctionObject*>(value)->func_module;  // borrowed
    if (module != nullptr && PyUnicode_Check(module) &&
        PyUnicode_CompareWithASCIIString(module, "__main__") == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

void PreloadSerializers(PyObject* globals) {
  static PyObject* dill_name = PyUnicode_InternFromString("dill");
  if (globals == nullptr || dill_name == nullptr) return;
  PyObject* loaded = PyImport_GetModule(dill_name);  // new reference or nullptr
  if (loaded != nullptr) {
    Py_DECREF(loaded);
    return;
  }
  PyErr_Clear();
  if (!HoldsMainDefinition(globals)) return;
  Py_XDECREF(PyImport_Import(dill_name));
  PyErr_Clear();
}

}  // namespace dolsot
