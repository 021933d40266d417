// Namespace checkpoints: turns a session's globals into one self-describing blob
// and back, one name at a time (pickle first, dill only where pickle cannot).
#pragma once

#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend_subprocess/checkpoint_metadata.h"
#include "core/status.h"

namespace dolsot {

// The outcome of SerializeNamespace. Owns its data; holds no Python references,
// so it may outlive the GIL and be handed to any thread (e.g. a SessionStore).
struct SerializedNamespace {
  std::string blob;                  // the checkpoint (format: docs/checkpoint-format.md)
  std::vector<std::string> saved;    // names stored in `blob`, in blob order
  std::vector<std::string> dropped;  // names that neither pickle nor dill could store
};

// Serializes every name of `globals` (a dict, borrowed; in a session it is
// `__main__.__dict__`) except dunder names (`__x__`) and the names in `skip`
// (toolbox aliases, which the caller re-injects). Each name is encoded on its
// own (details: docs/checkpoint-format.md):
//   - a module becomes a reference to its name, re-imported on restore;
//   - a class or function defined in __main__ (by a cell) goes to dill, by value;
//   - anything else goes to the C pickler (protocol 5). It falls back to dill only
//     when pickle fails on a reference (a lambda, a local function). A "cannot
//     pickle 'X' object" TypeError (lock, socket, generator, file) drops the name
//     without trying dill.
// dill is imported only when some name needs it. A name whose encoding raises
// anything is listed in `dropped`; it never sinks the rest. `globals` is not
// modified. The Python error indicator is clear on return.
// Requires: the GIL is held by the calling thread (it is never released here)
// and no Python exception is pending.
// Never fails as a whole: a `globals` that is not a dict yields a valid blob
// with no entries.
// The blob also keeps `cells_run` (the session's cell counter, so restored
// cells are not renumbered) and the source of every cell ("<cell N>", as
// registered by RunCell) that a function or class saved by value was defined
// in, so tracebacks through it show its lines after a restore.
SerializedNamespace SerializeNamespace(PyObject* globals,
                                       const std::vector<std::string>& skip,
                                       std::uint64_t cells_run = 0);

// SerializeNamespace without building the blob: the same bytes as `pieces`
// (the header, each entry's header, views of its pickled chunks, in order),
// for a caller that sends them at once (an async checkpoint's writer): at
// 100 MB the blob is a copy into fresh memory, ~25,600 page faults. Holds
// the pickled chunks (Python objects): destroy it with the GIL held.
class NamespacePieces {
 public:
  NamespacePieces();
  ~NamespacePieces();
  NamespacePieces(NamespacePieces&&) noexcept;
  NamespacePieces& operator=(NamespacePieces&&) = delete;

  std::vector<std::string_view> pieces;  // the blob, in order
  std::size_t size = 0;                  // their total
  std::vector<std::string> saved;        // as SerializedNamespace's
  std::vector<std::string> dropped;
  // A delta checkpoint (SerializeNamespacePieces' `against`): the blob holds
  // the names that are not the base's values; `kept` (sorted, also in
  // `saved`) are.
  bool delta = false;
  CheckpointBase delta_of;
  std::vector<std::string> kept;

 private:
  friend NamespacePieces SerializeNamespacePieces(PyObject*, const std::vector<std::string>&,
                                                  std::uint64_t, const BaseDigests*);
  struct Held;
  std::unique_ptr<Held> held_;
};
// With `against` (may be null: a whole checkpoint), a delta checkpoint of it
// when some value is the base's (its entry has the base's digest) and the
// delta writes no more bytes than it keeps; else a whole one (the values
// found to be the base's encoded again). Every value is pickled all the same (that is how a change is
// found), but one the base holds is pickled into its digest alone, keeping
// nothing, and pickled again only if it differs.
NamespacePieces SerializeNamespacePieces(PyObject* globals, const std::vector<std::string>& skip,
                                         std::uint64_t cells_run = 0,
                                         const BaseDigests* against = nullptr);

// The filename of a session's n-th cell, "<cell n>" (shown in tracebacks).
// A checkpoint keeps sources under such names only.
std::string CellFilename(std::uint64_t n);

// Imports dill in this process once `globals` holds a class or function a
// cell defined (which only dill can save), so the checkpoint writers forked
// from it inherit the module instead of each importing it again (~50 ms of
// CPU per checkpoint). Cheap when dill is loaded or not needed. Needs the GIL;
// leaves the error indicator clear.
void PreloadSerializers(PyObject* globals);

// The outcome of RestoreNamespace.
struct RestoredNamespace {
  std::vector<std::string> restored;  // names set into globals
  std::vector<std::string> failed;    // names whose value could not be loaded
  std::uint64_t cells_run = 0;        // the session's cell counter (0 in a version 1 blob)
};

// Restores the names stored in `blob` into `globals` (a dict, borrowed), one at a
// time: module references first, then cell definitions (retried while progress
// is made, since one may refer to another), then pickled values. A name whose
// payload fails to load (its class or module is gone, ...) is listed in `failed`,
// and its previous value, if any, stays in `globals`. The others are set.
// The cell sources the blob keeps are registered (RegisterCellSource) first.
// The whole blob is validated BEFORE anything is set: magic, version, bounds of
// every length, codecs and each entry's CRC-32C. A blob that is not a dolsot
// checkpoint, has an unknown version, is truncated or is corrupted anywhere returns
// kCorrupt and leaves `globals` untouched. A `globals` that is not a dict returns
// kInvalidArgument. The Python error indicator is clear on return. `blob` is only
// read during the call. Unpickling runs code: pass only blobs that dolsot itself
// wrote to a private store.
// Requires: the GIL is held by the calling thread and no Python exception is
// pending.
StatusOr<RestoredNamespace> RestoreNamespace(PyObject* globals, std::string_view blob);

}  // namespace dolsot
